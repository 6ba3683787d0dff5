package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/bench/runner"
	"github.com/playhead/playhead/internal/units"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/vfs"
)

// Flag checks. Every bad value is refused before any work starts, with one line that
// names the flag and says what it accepts: a message naming an internal option
// ("readahead: initial window ...") leaves a user guessing which flag to change.

// readAheadReaders is how many sequential readers at full read-ahead the cache must hold
// at once: a player, a second open of the same file, a scanner, a thumbnailer. A smaller
// cache evicts blocks fetched ahead before their reader arrives, so they are fetched again
// and read-ahead costs traffic without ever saving a wait.
const readAheadReaders = 4

// checkReadAhead refuses a read-ahead window (the value of flag, ra bytes) that is on
// but smaller than one cache block: it would fall inside the block the reader is
// already in and fetch nothing.
func checkReadAhead(flag, value string, ra, blockSize int64) error {
	if ra > 0 && ra < blockSize {
		return fmt.Errorf("bad %s %s: must be 0 (read-ahead off) or at least %s (one cache block)",
			flag, value, flagBytes(blockSize))
	}
	return nil
}

// checkCacheHoldsReadAhead refuses a cache smaller than the read-ahead of
// readAheadReaders readers.
func checkCacheHoldsReadAhead(m *mountFlags, o vfs.Options) error {
	if o.ReadAhead.MaxWindow == 0 {
		return nil
	}
	need := readAheadReaders * (o.ReadAhead.MaxWindow + o.ReadAhead.SeekFetch)
	if o.Cache.MaxBytes < need {
		return fmt.Errorf("--cache-size %s is too small for --read-ahead %s: the cache must hold the read-ahead of %d readers, at least %s; raise --cache-size or lower --read-ahead",
			m.cacheSize, m.readAhead, readAheadReaders, flagBytes(need))
	}
	return nil
}

// flagBytes writes n as a flag takes it: "256KiB", not "256 KiB".
func flagBytes(n int64) string { return strings.ReplaceAll(units.FormatBytes(n), " ", "") }

// Values of --cache-direct-io.
const (
	directIOAuto = "auto" // direct writes for blocks from fast origins while the disk is behind
	directIOOn   = "on"   // every block written direct where the file system allows
	directIOOff  = "off"  // every block through the page cache
)

// applyCacheDirectIO sets o for the --cache-direct-io value v.
func applyCacheDirectIO(o *vfs.Options, v string) error {
	switch v {
	case directIOAuto:
	case directIOOn:
		o.Fetch.ForceDirectWrites = true
	case directIOOff:
		o.Cache.BufferedIO = true
		o.Fetch.DirectWriteRate = -1
	default:
		return fmt.Errorf("bad --cache-direct-io %q: want auto, on or off", v)
	}
	return nil
}

// checkPositive refuses a size or rate flag of zero: the option structs read zero as
// "the default", which is not what a user who types 0 means.
func checkPositive(flag, value string, n int64) error {
	if n <= 0 {
		return fmt.Errorf("bad %s %s: must be more than 0", flag, value)
	}
	return nil
}

// checkLink refuses an unknown user-space link profile (the demo's; bench run also takes
// the kernel-shaped ones).
func checkLink(name string) error {
	if _, err := linkemu.Profile(name); err != nil {
		return fmt.Errorf("bad --link %q: want %s", name, strings.Join(linkemu.ProfileNames(), ", "))
	}
	return nil
}

// validate checks bench run's flags before anything is generated or started. --trials,
// --bulk-size and --scenario are checked where they are used, also before.
func (f benchRunFlags) validate() error {
	if runner.CheckLink(f.link) != nil {
		return fmt.Errorf("bad --link %q: want %s", f.link, strings.Join(runner.LinkNames(), ", "))
	}
	if f.origin != runner.OriginBuiltin && f.origin != runner.OriginNginx && f.origin != runner.OriginS3 {
		return fmt.Errorf("bad --origin %q: want %s, %s or %s", f.origin, runner.OriginBuiltin, runner.OriginNginx, runner.OriginS3)
	}
	if f.minio != "" {
		if f.origin != runner.OriginS3 {
			return fmt.Errorf("bad --minio %q: only used with --origin s3", f.minio)
		}
		if _, err := exec.LookPath(f.minio); err != nil {
			return fmt.Errorf("bad --minio %q: %w", f.minio, err)
		}
	}
	if f.tempDir != "" {
		if st, err := os.Stat(f.tempDir); err != nil || !st.IsDir() {
			return fmt.Errorf("bad --temp-dir %q: not an existing directory", f.tempDir)
		}
	}
	if f.jsonPath != "" {
		if st, err := os.Stat(filepath.Dir(f.jsonPath)); err != nil || !st.IsDir() {
			return fmt.Errorf("bad --json %q: its directory does not exist", f.jsonPath)
		}
	}
	if f.plotDir != "" {
		if err := os.MkdirAll(f.plotDir, 0o755); err != nil {
			return fmt.Errorf("bad --plot %q: %w", f.plotDir, err)
		}
	}
	for _, c := range f.compare {
		if c != "rclone" {
			return fmt.Errorf("bad --compare %q: the comparator is rclone", c)
		}
	}
	usesRclone := slices.Contains(f.compare, "rclone")
	if f.rclone != "" {
		if !usesRclone {
			return fmt.Errorf("bad --rclone %q: only used with --compare rclone", f.rclone)
		}
		if _, err := exec.LookPath(f.rclone); err != nil {
			return fmt.Errorf("bad --rclone %q: %w", f.rclone, err)
		}
	}
	if f.rcloneTuned != "" {
		if !usesRclone {
			return fmt.Errorf("bad --rclone-tuned: only used with --compare rclone")
		}
		if !strings.HasPrefix(strings.TrimSpace(f.rcloneTuned), "-") {
			return fmt.Errorf("bad --rclone-tuned %q: want rclone flags, such as \"--vfs-cache-mode full\"", f.rcloneTuned)
		}
	}
	return checkMountArgs(f.mountArgs)
}

// checkMountArgs parses --mount-arg values as the mount command would, so a bad one
// fails the run at once rather than every trial's mount.
func checkMountArgs(args []string) error {
	if len(args) == 0 {
		return nil
	}
	var m mountFlags
	cmd := &cobra.Command{}
	m.bind(cmd)
	fs := cmd.Flags()
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("bad --mount-arg: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bad --mount-arg %q: not a flag", fs.Arg(0))
	}
	if _, err := newLogger(m.logLevel); err != nil {
		return fmt.Errorf("bad --mount-arg: %w", err)
	}
	if _, err := m.options(); err != nil {
		return fmt.Errorf("bad --mount-arg: %w", err)
	}
	if _, err := m.kernelReadAhead(); err != nil {
		return fmt.Errorf("bad --mount-arg: %w", err)
	}
	return nil
}

// checkDemoFlags checks demo's flags once parsed: the sample size and the rate must be
// positive, the read-ahead 0 or at least a block, the link a known profile.
func checkDemoFlags(d demoFlags, size, rate, ra int64) error {
	if err := checkPositive("--size", d.size, size); err != nil {
		return err
	}
	if err := checkPositive("--rate", d.rate, rate); err != nil {
		return err
	}
	if err := checkReadAhead("--read-ahead", d.readAhead, ra, vfs.DefaultOptions().Cache.BlockSize); err != nil {
		return err
	}
	return checkLink(d.link)
}

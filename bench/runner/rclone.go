package runner

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/playhead/playhead/bench/report"
)

// rclone is the comparator: `rclone mount` of the same origin over the same link,
// through its http remote given on the command line (no config file), or for a bucket
// (--origin s3) its s3 remote defined by environment variables, once with its defaults
// and once with the streaming flags that suit the link.

// chunkStreamsFlag is rclone's parallel chunk reader (v1.68 and later).
const chunkStreamsFlag = "--vfs-read-chunk-streams"

// rcloneTermExit is rclone's exit code after a clean unmount on SIGTERM (128+15).
const rcloneTermExit = 143

// rcloneProbeTimeout bounds `rclone version` and `rclone help flags`.
const rcloneProbeTimeout = 20 * time.Second

// Rclone is an rclone binary and what it can do.
type Rclone struct {
	Path         string // the binary
	Version      string // first line of `rclone version`
	ChunkStreams bool   // it has --vfs-read-chunk-streams
}

// FindRclone looks for rclone: explicit if not empty, else bin/deps/rclone next to the
// playhead binary (what `make bench-deps` builds when the system's is too old), else
// PATH. Its error says what was looked at.
func FindRclone(explicit, exe string) (Rclone, error) {
	candidates := []string{explicit}
	if explicit == "" {
		candidates = []string{filepath.Join(filepath.Dir(exe), "deps", "rclone"), "rclone"}
	}
	var tried []string
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c)
			continue
		}
		return probeRclone(path)
	}
	return Rclone{}, fmt.Errorf("rclone not found (looked for %s); `make bench-deps` installs it", strings.Join(tried, ", "))
}

func probeRclone(path string) (Rclone, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rcloneProbeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return Rclone{}, fmt.Errorf("%s version: %w", path, err)
	}
	r := Rclone{Path: path, Version: strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])}
	// Newer versions list the VFS flags under `help flags`; older ones only under the
	// mount command's help. Ask both.
	for _, args := range [][]string{{"help", "flags"}, {"mount", "--help"}} {
		help, _ := exec.CommandContext(ctx, path, args...).CombinedOutput()
		r.ChunkStreams = r.ChunkStreams || strings.Contains(string(help), chunkStreamsFlag)
	}
	return r, nil
}

// TunedFlags are the rclone flags for streaming over a link profile: the full VFS cache
// (reads are kept on disk, so a rewatch and a seek back are local), read-ahead of
// several seconds of the link, and, where connections are capped and the version has
// it, parallel chunk streams sized as rclone's documentation suggests for object stores.
func (r Rclone) TunedFlags(link string) []string {
	flags := []string{"--vfs-cache-mode", "full", "--vfs-read-ahead", "256Mi", "--buffer-size", "32Mi",
		"--max-read-ahead", "256Ki", "--dir-cache-time", "1h"}
	if r.ChunkStreams && !sharedPipe(link) {
		// Capped connections (cloud: 25 MB/s each) or plenty of bandwidth: rclone's
		// suggested start. A copy on cloud ran 7x faster with it (smoke run, 100 MB).
		return append(flags, chunkStreamsFlag, "16", "--vfs-read-chunk-size", "4Mi")
	}
	// One stream per file, 16 MiB ranges doubling without limit, so a long read is one
	// request after a few round trips. On far one connection fills the shared 30 MB/s,
	// and 4 chunk streams of 8 MiB started playback in 460-560 ms against 226 ms with
	// one stream (smoke runs, play at 3-20 MB/s), so chunk streams are not the best
	// flags there even where the version has them.
	return append(flags, "--vfs-read-chunk-size", "16Mi", "--vfs-read-chunk-size-limit", "off")
}

// s3TunedFlags are added to the tuned flags for a bucket. --use-server-modtime takes a
// file's time from the listing: without it rclone's s3 backend HEADs every object for
// its mtime metadata when the VFS lists or stats it, a round trip per file. (Its
// --s3-no-head-object saves nothing here: the VFS opens objects it has listed.)
var s3TunedFlags = []string{"--use-server-modtime"}

// RcloneSystems returns the comparator's columns: rclone's defaults and its tuned
// flags for link, mounting the origin's HTTP directory or, with origin OriginS3, the
// bucket. When rclone cannot be found, both are there with the reason, so every case
// says it could not run. extra replaces the tuned flags when not nil.
func RcloneSystems(r Rclone, findErr error, link, origin string, extra []string) []System {
	tuned := r.TunedFlags(link)
	if origin == OriginS3 {
		tuned = append(tuned, s3TunedFlags...)
	}
	if extra != nil {
		tuned = extra
	}
	mk := func(name string, flags []string, note string) System {
		argv := func(req MountRequest) []string {
			if req.Bucket != nil {
				return append([]string{"mount", req.Bucket.RcloneRemote(), req.Dir, "--config", "",
					"--cache-dir", req.CacheDir}, flags...)
			}
			return append([]string{"mount", ":http:", req.Dir, "--http-url", req.OriginURL, "--config", "",
				"--cache-dir", req.CacheDir}, flags...)
		}
		env := func(req MountRequest) []string {
			if req.Bucket != nil {
				return req.Bucket.RcloneEnv(req)
			}
			return nil
		}
		example := MountRequest{Dir: "MNT", OriginURL: "URL", CacheDir: "CACHE"}
		command := cmp.Or(r.Path, "rclone") + " " + shellJoin(argv(example))
		if origin == OriginS3 {
			example.Bucket = &Bucket{Name: BucketName, Region: BucketRegion, AccessKey: "KEY", SecretKey: "SECRET"}
			example.OriginURL = "LINK"
			command = strings.Join(example.Bucket.RcloneEnv(example), " ") + " " +
				cmp.Or(r.Path, "rclone") + " " + shellJoin(argv(example))
		}
		s := System{Info: report.System{Name: name, Kind: report.KindSUT, Version: r.Version,
			Command: command, Note: note}}
		if findErr != nil {
			s.Info.Unavailable = findErr.Error()
			return s
		}
		s.SUT = &ProcessSUT{Exe: r.Path, Argv: argv, Env: env, TermExitCodes: []int{rcloneTermExit}}
		return s
	}
	tunedNote := "rclone's streaming flags for the " + link + " link"
	if origin == OriginS3 && extra == nil {
		tunedNote += ", and " + strings.Join(s3TunedFlags, " ") + " (no HEAD per object for its time)"
	}
	if findErr == nil && r.ChunkStreams && sharedPipe(link) {
		tunedNote += fmt.Sprintf("; %s left out: on this link it started playback about twice as slowly as one stream", chunkStreamsFlag)
	}
	if findErr == nil && !r.ChunkStreams {
		tunedNote += fmt.Sprintf("; this version has no %s (added in v1.68), so it reads one stream per file "+
			"(`make bench-deps` builds a newer rclone into bin/deps)", chunkStreamsFlag)
	}
	if extra != nil {
		tunedNote = "flags given with --rclone-tuned"
	}
	return []System{
		mk("rclone", nil, "rclone's defaults (no VFS cache: --vfs-cache-mode off)"),
		mk("rclone tuned", tuned, tunedNote),
	}
}

// shellJoin joins args for a reader to paste into a shell: an empty one is "".
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if a == "" {
			quoted[i] = `""`
		}
	}
	return strings.Join(quoted, " ")
}

// sharedPipe reports whether every connection of the link shares one slow pipe (far and
// its kernel-shaped twin), where rclone's chunk streams are left out.
func sharedPipe(link string) bool {
	return link == "far" || link == "far-shared"
}

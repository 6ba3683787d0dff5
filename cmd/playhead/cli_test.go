package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The CLI tests run the real command: TestMain turns this test binary into playhead
// when runMainEnv is set, so every case is a separate process with its own exit code
// and stderr, as a user sees them.
const runMainEnv = "PLAYHEAD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"playhead"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cliTimeout bounds one run: every case must fail long before, so reaching it means
// the command hung (or mounted when it should not have).
const cliTimeout = 20 * time.Second

// runCLI runs playhead with args and returns its exit code, stderr and duration.
func runCLI(t *testing.T, wrap []string, args ...string) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	argv := append(append(wrap, os.Args[0]), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("playhead %q still running after %v; stderr:\n%s", args, cliTimeout, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String(), took
}

// checkOneLineError wants exit code 1 and stderr of exactly one line starting with
// "playhead: " and containing want, without a panic.
func checkOneLineError(t *testing.T, code int, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	switch {
	case strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine "):
		t.Errorf("panicked:\n%s", stderr)
	case code != 1:
		t.Errorf("exit code %d, want 1; stderr:\n%s", code, stderr)
	case len(lines) != 1 || !strings.HasPrefix(lines[0], "playhead: "):
		t.Errorf("stderr is not one \"playhead: ...\" line:\n%s", stderr)
	case !strings.Contains(lines[0], want):
		t.Errorf("error %q does not say %q", lines[0], want)
	}
}

// silentOrigin accepts connections and never answers: an origin that hangs.
func silentOrigin(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// statusOrigin answers every request with code.
func statusOrigin(t *testing.T, code int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(code), code)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// Bad command lines, bad sources and bad mountpoints: each must end the command at once
// with exit code 1 and one clear line on stderr, never a panic, a hang or a mount.
// Every flag of every command has a bad-value case, and a bad flag's line names it. No
// case needs FUSE: each fails before mounting.
func TestHostileCommandLines(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	mp := filepath.Join(tmp, "mp")
	nonEmpty := filepath.Join(tmp, "nonempty")
	aFile := filepath.Join(tmp, "afile")
	for _, d := range []string{src, mp, nonEmpty} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{aFile, filepath.Join(src, "x.bin"), filepath.Join(nonEmpty, "keep.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	longSecret := filepath.Join(tmp, "secret")
	if err := os.WriteFile(longSecret, []byte("a-long-enough-cluster-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cache := []string{"--cache-dir", filepath.Join(tmp, "cache")}
	silent, notFound, forbidden, broken := silentOrigin(t), statusOrigin(t, 404), statusOrigin(t, 403), statusOrigin(t, 500)

	cases := []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"no arguments", []string{"mount"}, "accepts 2 arg(s), received 0"},
		{"three arguments", []string{"mount", src, mp, "extra"}, "accepts 2 arg(s), received 3"},
		{"unknown command", []string{"mount-all"}, "unknown command"},
		{"unknown flag", []string{"mount", "--bogus", src, mp}, "unknown flag: --bogus"},
		{"cache size not a size", []string{"mount", "--cache-size", "lots", src, mp}, "--cache-size"},
		{"cache size negative", []string{"mount", "--cache-size", "-5GiB", src, mp}, "--cache-size"},
		{"cache size zero", []string{"mount", "--cache-size", "0", src, mp}, "--cache-size"},
		{"cache size one byte", []string{"mount", "--cache-size", "1", src, mp}, "--cache-size"},
		{"read-ahead negative", []string{"mount", "--read-ahead", "-1", src, mp}, "--read-ahead"},
		{"read-ahead overflow", []string{"mount", "--read-ahead", "99999999999TiB", src, mp}, "--read-ahead"},
		{"io timeout not a duration", []string{"mount", "--io-timeout", "soon", src, mp}, "--io-timeout"},
		{"io timeout negative", []string{"mount", "--io-timeout", "-1s", src, mp}, "--io-timeout"},
		{"io timeout zero", []string{"mount", "--io-timeout", "0", src, mp}, "--io-timeout"},
		{"list ttl negative", []string{"mount", "--list-ttl", "-5s", src, mp}, "--list-ttl"},
		{"log level unknown", []string{"mount", "--log-level", "loud", src, mp}, "--log-level"},
		{"empty source", []string{"mount", "", mp}, "empty source"},
		{"ftp source", []string{"mount", "ftp://127.0.0.1/x/", mp}, "unsupported source"},
		{"url without host", []string{"mount", "http://", mp}, "no host"},
		{"url unparsable", []string{"mount", "http://[::1", mp}, "bad source URL"},
		{"url with fragment", []string{"mount", "http://127.0.0.1/#frag", mp}, "fragment"},
		{"url with control character", []string{"mount", "http://127.0.0.1/a\x01b", mp}, "bad source URL"},
		{"origin refuses connections", []string{"mount", "http://127.0.0.1:1/", mp}, "origin unreachable"},
		{"origin never answers", []string{"mount", "--io-timeout", "1s", silent, mp}, "origin unreachable"},
		{"origin 404", []string{"mount", notFound, mp}, "not found"},
		{"origin 403", []string{"mount", forbidden, mp}, "permission denied"},
		{"origin 500", []string{"mount", broken, mp}, "500"},
		{"source directory missing", []string{"mount", filepath.Join(tmp, "nope"), mp}, "no such file or directory"},
		{"source is a file", []string{"mount", aFile, mp}, "not a directory"},
		{"file url missing", []string{"mount", "file://" + filepath.Join(tmp, "nope"), mp}, "no such file or directory"},
		{"mountpoint missing", []string{"mount", src, filepath.Join(tmp, "nope", "mp")}, "no such file or directory"},
		{"mountpoint is a file", []string{"mount", src, aFile}, "not a directory"},
		{"mountpoint not empty", []string{"mount", src, nonEmpty}, "not empty"},
		{"metrics address without port", []string{"mount", "--metrics", "nonsense", src, mp}, "--metrics"},
		{"metrics port out of range", []string{"mount", "--metrics", "127.0.0.1:99999", src, mp}, "--metrics"},
		{"cache dir is a file", []string{"mount", "--cache-dir", aFile, src, mp}, "cannot open cache"},
		{"cache dir cannot be made", []string{"mount", "--cache-dir", "/proc/playhead-cache", src, mp}, "cannot open cache"},
		{"cache dir empty", []string{"mount", "--cache-dir", "", src, mp}, "--cache-dir"},
		{"read-ahead below one block", []string{"mount", "--read-ahead", "100KiB", src, mp}, "bad --read-ahead 100KiB: must be 0 (read-ahead off) or at least 256KiB"},
		{"read-ahead not a size", []string{"mount", "--read-ahead", "lots", src, mp}, "--read-ahead"},
		{"cache too small for read-ahead", []string{"mount", "--cache-size", "100MiB", src, mp}, "--cache-size 100MiB is too small for --read-ahead 64MiB"},
		{"cache direct io unknown", []string{"mount", "--cache-direct-io", "sometimes", src, mp}, "bad --cache-direct-io \"sometimes\": want auto, on or off"},
		{"list ttl not a duration", []string{"mount", "--list-ttl", "often", src, mp}, "--list-ttl"},
		{"kernel read-ahead too big", []string{"mount", "--kernel-read-ahead", "2MiB", src, mp}, "--kernel-read-ahead"},
		{"kernel read-ahead not a size", []string{"mount", "--kernel-read-ahead", "lots", src, mp}, "--kernel-read-ahead"},
		{"allow-other not a bool", []string{"mount", "--allow-other=maybe", src, mp}, "--allow-other"},
		{"debug-fuse not a bool", []string{"mount", "--debug-fuse=maybe", src, mp}, "--debug-fuse"},
		{"uid not a number", []string{"mount", "--uid", "root", src, mp}, "--uid"},
		{"uid negative", []string{"mount", "--uid", "-1", src, mp}, "--uid"},
		{"gid not a number", []string{"mount", "--gid", "staff", src, mp}, "--gid"},
		{"gid too big", []string{"mount", "--gid", "4294967296", src, mp}, "--gid"},
		{"umask not octal", []string{"mount", "--umask", "099", src, mp}, "bad --umask \"099\""},
		{"umask too big", []string{"mount", "--umask", "1777", src, mp}, "bad --umask \"1777\""},
		{"s3 url without bucket", []string{"mount", "s3://", mp}, "want s3://BUCKET/PREFIX"},
		{"s3 url with query", []string{"mount", "s3://b?region=x", mp}, "take no query"},
		{"s3 prefix with dot-dot", []string{"mount", "s3://b/a/../c", mp}, `".." segment`},
		{"s3 endpoint not http", []string{"mount", "--s3-endpoint", "ftp://x", "s3://b", mp}, "--s3-endpoint"},
		{"s3 endpoint refuses", []string{"mount", "--s3-no-sign", "--s3-endpoint", "http://127.0.0.1:1", "s3://b", mp}, "cannot reach s3://b"},
		{"s3 region invalid", []string{"mount", "--s3-no-sign", "--s3-region", "us east", "--s3-endpoint", "http://127.0.0.1:1", "s3://b", mp}, "invalid input region"},
		{"s3 path-style not a bool", []string{"mount", "--s3-path-style=maybe", "s3://b", mp}, "--s3-path-style"},
		{"s3 no-sign not a bool", []string{"mount", "--s3-no-sign=maybe", "s3://b", mp}, "--s3-no-sign"},
		{"azure endpoint not a URL", []string{"mount", "--azure-endpoint", "nope", "azblob://c", mp}, "--azure-endpoint"},
		{"azure account without credentials", []string{"mount", "--azure-account", "acct", "--azure-endpoint", "https://127.0.0.1:1/acct", "azblob://c", mp}, "no credentials found"},
		{"gcs endpoint not http", []string{"mount", "--gcs-endpoint", "ftp://x", "gs://b", mp}, "--gcs-endpoint"},
		{"gcs endpoint refuses", []string{"mount", "--io-timeout", "2s", "--gcs-endpoint", "http://127.0.0.1:1", "gs://b", mp}, "cannot reach gs://b"},
		{"cpuprofile cannot be written", []string{"mount", "--cpuprofile", "/proc/nope/cpu.prof", src, mp}, "--cpuprofile"},
		{"peer listen not an address", []string{"mount", "--peer-listen", "nope", "--peer-secret-file", aFile, src, mp}, "bad --peer-listen"},
		{"peer http a wildcard", []string{"mount", "--peers", "127.0.0.1:7947", "--peer-http", "0.0.0.0:7948", "--peer-secret-file", aFile, src, mp}, "not a wildcard"},
		{"join without peer listen", []string{"mount", "--join", "127.0.0.1:7946", src, mp}, "need --peer-listen"},
		{"peers without secret", []string{"mount", "--peers", "127.0.0.1:7947", "--peer-http", "127.0.0.1:7948", src, mp}, "--peer-secret-file"},
		{"peer secret file short", []string{"mount", "--peers", "127.0.0.1:7947", "--peer-http", "127.0.0.1:7948", "--peer-secret-file", aFile, src, mp}, "shorter than 16 bytes"},
		{"peer tls cert without the tier", []string{"mount", "--peer-tls-cert", aFile, src, mp}, "--peer-tls-* need --peer-listen or --peers"},
		{"peer local copy without the tier", []string{"mount", "--peer-local-copy", src, mp}, "--peer-local-copy and --peer-tls-* need --peer-listen or --peers"},
		{"peer tls key without cert and ca", []string{"mount", "--peers", "127.0.0.1:7947", "--peer-http", "127.0.0.1:7948", "--peer-secret-file", aFile, "--peer-tls-key", aFile, src, mp}, "--peer-tls-key and --peer-tls-ca go together"},
		{"peer tls ca missing", []string{"mount", "--peers", "127.0.0.1:7947", "--peer-http", "127.0.0.1:7948", "--peer-secret-file", longSecret, "--peer-tls-cert", aFile, "--peer-tls-key", aFile, "--peer-tls-ca", filepath.Join(tmp, "nope.crt"), src, mp}, "bad --peer-tls-ca"},
		{"peers without address", []string{"peers", "--peer-secret-file", aFile}, "accepts 1 arg(s), received 0"},
		{"peers address without port", []string{"peers", "127.0.0.1", "--peer-secret-file", aFile}, "bad address"},
		{"peers secret file short", []string{"peers", "127.0.0.1:1", "--peer-secret-file", aFile}, "shorter than 16 bytes"},
		{"peers without secret", []string{"peers", "127.0.0.1:1", "--json"}, "--peer-secret-file is required"},
		{"peers json bad flag value", []string{"peers", "127.0.0.1:1", "--json=maybe", "--peer-secret-file", aFile}, "--json"},
		{"peers tls cert alone", []string{"peers", "127.0.0.1:1", "--peer-secret-file", longSecret, "--peer-tls-cert", aFile}, "go together"},
		{"peers tls key unreadable", []string{"peers", "127.0.0.1:1", "--peer-secret-file", longSecret, "--peer-tls-cert", aFile, "--peer-tls-key", filepath.Join(tmp, "nope.key"), "--peer-tls-ca", aFile}, "bad --peer-tls-key"},
		{"peers tls ca not a certificate", []string{"peers", "127.0.0.1:1", "--peer-secret-file", longSecret, "--peer-tls-cert", aFile, "--peer-tls-key", aFile, "--peer-tls-ca", aFile}, "bad --peer-tls-cert, --peer-tls-key or --peer-tls-ca"},

		{"bench play rate not a rate", []string{"bench", "play", "--rate", "fast", aFile}, "--rate"},
		{"bench play rate zero", []string{"bench", "play", "--rate", "0", aFile}, "bad --rate 0: must be more than 0"},
		{"bench play chunk not a size", []string{"bench", "play", "--chunk", "lots", aFile}, "--chunk"},
		{"bench play chunk zero", []string{"bench", "play", "--chunk", "0", aFile}, "bad --chunk 0"},
		{"bench play start negative", []string{"bench", "play", "--start", "-1", aFile}, "--start"},
		{"bench play limit negative", []string{"bench", "play", "--limit", "-5", aFile}, "--limit"},
		{"bench play json not a bool", []string{"bench", "play", "--json=maybe", aFile}, "--json"},
		{"bench run scenario unknown", []string{"bench", "run", "--scenario", "nope"}, "unknown scenario"},
		{"bench run link unknown", []string{"bench", "run", "--link", "moon"}, "bad --link \"moon\": want cloud, far, lan, loopback, cloud-kernel, far-shared"},
		{"bench run case unknown", []string{"bench", "run", "--scenario", "play", "--case", "play 99MB/s"}, "bad --case \"play 99MB/s\": no case's name contains it; the cases: play 3MB/s; play 8MB/s; play 20MB/s"},
		{"bench run trials zero", []string{"bench", "run", "--trials", "0"}, "--trials"},
		{"bench run trials not a number", []string{"bench", "run", "--trials", "many"}, "--trials"},
		{"bench run json directory missing", []string{"bench", "run", "--json", filepath.Join(tmp, "nope", "r.json")}, "--json"},
		{"bench run quick not a bool", []string{"bench", "run", "--quick=maybe"}, "--quick"},
		{"bench run bulk size not a size", []string{"bench", "run", "--bulk-size", "lots"}, "--bulk-size"},
		{"bench run allow-stale not a bool", []string{"bench", "run", "--allow-stale=maybe"}, "--allow-stale"},
		{"bench run temp dir missing", []string{"bench", "run", "--temp-dir", filepath.Join(tmp, "nope")}, "--temp-dir"},
		{"bench run mount arg unknown", []string{"bench", "run", "--mount-arg=--bogus"}, "bad --mount-arg: unknown flag: --bogus"},
		{"bench run mount arg bad value", []string{"bench", "run", "--mount-arg=--read-ahead=100KiB"}, "bad --mount-arg: bad --read-ahead"},
		{"bench run compare unknown", []string{"bench", "run", "--compare", "nope"}, "--compare"},
		{"bench run ceilings not a bool", []string{"bench", "run", "--ceilings=maybe"}, "--ceilings"},
		{"bench run origin unknown", []string{"bench", "run", "--origin", "apache"}, "bad --origin \"apache\""},
		{"bench run minio missing", []string{"bench", "run", "--origin", "s3", "--minio", filepath.Join(tmp, "nope", "minio")}, "--minio"},
		{"bench run minio without s3", []string{"bench", "run", "--minio", aFile}, "only used with --origin s3"},
		{"bench run plot cannot be made", []string{"bench", "run", "--plot", "/proc/nope/plots"}, "--plot"},
		{"bench run rclone missing", []string{"bench", "run", "--compare", "rclone", "--rclone", filepath.Join(tmp, "nope", "rclone")}, "--rclone"},
		{"bench run rclone without compare", []string{"bench", "run", "--rclone", aFile}, "only used with --compare rclone"},
		{"bench run rclone-tuned not flags", []string{"bench", "run", "--compare", "rclone", "--rclone-tuned", "fast please"}, "--rclone-tuned"},
		{"demo size not a size", []string{"demo", "--size", "lots"}, "--size"},
		{"demo size zero", []string{"demo", "--size", "0"}, "bad --size 0"},
		{"demo rate zero", []string{"demo", "--rate", "0"}, "bad --rate 0"},
		{"demo rate not a rate", []string{"demo", "--rate", "fast"}, "--rate"},
		{"demo limit not a size", []string{"demo", "--limit", "lots"}, "--limit"},
		{"demo read-ahead below one block", []string{"demo", "--read-ahead", "100KiB"}, "bad --read-ahead 100KiB"},
		{"demo link unknown", []string{"demo", "--link", "moon"}, "bad --link \"moon\""},
		{"demo link kernel-shaped", []string{"demo", "--link", "far-shared"}, "bad --link \"far-shared\": want cloud, far, lan, loopback"},
		{"demo verbose not a bool", []string{"demo", "--verbose=maybe"}, "--verbose"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args[0] == "mount" && len(args) > 1 && !strings.HasPrefix(strings.Join(args, " "), "mount --cache-dir") {
				args = append(append([]string{args[0]}, cache...), args[1:]...)
			}
			code, stderr, took := runCLI(t, nil, args...)
			t.Logf("%v: exit %d after %v: %s", c.args, code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
			checkOneLineError(t, code, stderr, c.want)
		})
	}
	checkEveryFlagCovered(t, func(yield func([]string) bool) {
		for _, c := range cases {
			if !yield(c.args) {
				return
			}
		}
	})
	if entries, _ := os.ReadDir(nonEmpty); len(entries) != 1 {
		t.Errorf("the non-empty mountpoint holds %d entries afterwards, want its 1 file", len(entries))
	}

	// A password in the source URL never reaches the error.
	t.Run("password hidden", func(t *testing.T) {
		code, stderr, _ := runCLI(t, nil, "mount", "--cache-dir", cache[1], "http://user:hunter2@127.0.0.1:1/", mp)
		checkOneLineError(t, code, stderr, "origin unreachable")
		if strings.Contains(stderr, "hunter2") {
			t.Errorf("the error shows the password: %s", stderr)
		}
	})

	// FUSE missing: /dev without fuse, in a private mount namespace (root only).
	t.Run("no /dev/fuse", func(t *testing.T) {
		unshare, err := exec.LookPath("unshare")
		if os.Geteuid() != 0 || err != nil {
			t.Skip("hiding /dev/fuse needs root and unshare(1)")
		}
		wrap := []string{unshare, "--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs none /dev && exec "$@"`, "sh"}
		code, stderr, _ := runCLI(t, wrap, "mount", "--cache-dir", cache[1], src, mp)
		checkOneLineError(t, code, stderr, "FUSE is not available")
	})
	figure(t, "%d hostile command lines (bad flags, sources, origins, mountpoints, no /dev/fuse): "+
		"each exited 1 with one \"playhead: ...\" line, no panic, no hang", len(cases)+2)
}

// figure prints a reliability figure line (see integration/figures_test.go).
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("RELIABILITY %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// checkEveryFlagCovered fails for each flag of each command (hidden ones included) that
// no case passes: a new flag needs a bad-value case in TestHostileCommandLines.
func checkEveryFlagCovered(t *testing.T, cases iter.Seq[[]string]) {
	t.Helper()
	var walk func(path []string, cmd *cobra.Command)
	walk = func(path []string, cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			for args := range cases {
				if len(args) < len(path) || !slices.Equal(args[:len(path)], path) {
					continue
				}
				for _, a := range args[len(path):] {
					if a == "--"+f.Name || strings.HasPrefix(a, "--"+f.Name+"=") {
						return
					}
				}
			}
			t.Errorf("flag --%s of %q has no bad-value case", f.Name, strings.Join(path, " "))
		})
		for _, sub := range cmd.Commands() {
			walk(append(slices.Clone(path), sub.Name()), sub)
		}
	}
	for _, cmd := range []*cobra.Command{mountCmd(), benchCmd(), demoCmd(), peersCmd()} {
		walk([]string{cmd.Name()}, cmd)
	}
}

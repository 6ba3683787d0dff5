package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/objstore"
	"github.com/playhead/playhead/internal/testlog"
)

// No secret ever reaches the log, not even at debug level: a mount of a bucket that
// lists, reads, misses a file and is stopped, and a mount refused for a wrong secret,
// both with --log-level debug; neither output may hold the secret.
func TestCredentialsNeverLogged(t *testing.T) {
	for _, kind := range []objstore.Kind{objstore.S3, objstore.Azure} {
		t.Run(string(kind), func(t *testing.T) {
			srv := objstore.Start(t, kind)
			b := srv.NewBucket(t)
			b.Put(t, "dir/a.bin", []byte(strings.Repeat("x", 300<<10)))
			secret := srv.Secret()
			if secret == "" {
				t.Fatal("no secret to look for")
			}
			var flags []string
			for k, v := range srv.Params() {
				flags = append(flags, "--"+k+"="+v)
			}
			tmp := t.TempDir()
			mp := filepath.Join(tmp, "mp")
			if err := os.Mkdir(mp, 0o755); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"mount", "--log-level", "debug", "--cache-dir", filepath.Join(tmp, "cache")}, flags...)
			args = append(args, b.URL(""), mp)

			out := runMounted(t, srv.Env(), args, mp, func() {
				if data, err := os.ReadFile(filepath.Join(mp, "dir", "a.bin")); err != nil || len(data) != 300<<10 {
					t.Errorf("read through the mount: %d bytes, %v", len(data), err)
				}
				if _, err := os.Stat(filepath.Join(mp, "dir", "missing.bin")); err == nil {
					t.Errorf("a missing file exists")
				}
			})
			if !strings.Contains(out, "level=DEBUG") {
				t.Fatalf("no debug lines: the check would prove nothing:\n%s", out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("the debug log of a mount shows the secret")
			}

			wrong := srv.WrongEnv()
			code, stderr := runWithEnv(t, wrong, args...)
			if code == 0 || !strings.Contains(stderr, "check the credentials") {
				t.Errorf("a wrong secret: exit %d, %q; want a refusal naming the credentials", code, stderr)
			}
			for k, v := range wrong {
				if (k == "AWS_SECRET_ACCESS_KEY" || k == "AZURE_STORAGE_KEY") && strings.Contains(stderr, v) {
					t.Errorf("the refused mount's output shows the wrong secret")
				}
			}
			if strings.Contains(stderr, secret) {
				t.Errorf("the refused mount's output shows the secret")
			}
		})
	}
}

// runWithEnv runs playhead with args and env added, and returns its exit code and output.
func runWithEnv(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("playhead %q still running after %v:\n%s", args, cliTimeout, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// runMounted starts playhead with args (a mount of mp), runs use once it is mounted,
// stops it with SIGINT and returns everything it wrote.
func runMounted(t *testing.T, env map[string]string, args []string, mp string, use func()) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out testlog.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("playhead did not die after SIGKILL")
		}
		if isMounted(mp) {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}()
	for start := time.Now(); !isMounted(mp); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("playhead exited before mounting:\n%s", out.String())
		default:
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("not mounted after 15 s:\n%s", out.String())
		}
	}
	use()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Errorf("playhead still running 15 s after SIGINT")
	}
	return out.String()
}

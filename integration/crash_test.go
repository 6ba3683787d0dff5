package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/fusefs"
	"github.com/playhead/playhead/origin"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/vfs"
)

// The crash test re-runs this test binary as a mount daemon (TestMain sees
// crashDaemonEnv), kills it with SIGKILL in the middle of heavy reads, and finally mounts
// the same cache in-process and checks every byte of every file.
const (
	crashDaemonEnv = "PLAYHEAD_TEST_CRASH_DAEMON"
	crashURLEnv    = "PLAYHEAD_TEST_CRASH_URL"
	crashCacheEnv  = "PLAYHEAD_TEST_CRASH_CACHE"
	crashMountEnv  = "PLAYHEAD_TEST_CRASH_MOUNT"
	// crashKillsEnv raises the number of kills (the fast default is 3).
	crashKillsEnv = "PLAYHEAD_CRASH_KILLS"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashDaemonEnv) == "1" {
		runCrashDaemon()
		return
	}
	os.Exit(m.Run())
}

// runCrashDaemon mounts the origin and serves until it is killed.
func runCrashDaemon() {
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	src, err := httpsrc.New(os.Getenv(crashURLEnv), httpsrc.DefaultOptions())
	if err != nil {
		fail(err)
	}
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = os.Getenv(crashCacheEnv)
	opts.Cache.MaxBytes = 1 << 30
	fsys, err := vfs.New(src, opts)
	if err != nil {
		fail(err)
	}
	if _, err := fusefs.Mount(fsys, os.Getenv(crashMountEnv), fusefs.MountOptions{}); err != nil {
		fail(err)
	}
	fmt.Println("ready")
	select {}
}

func TestKill9DuringReadsNeverCorruptsTheCache(t *testing.T) {
	kills := 3
	if v, err := strconv.Atoi(os.Getenv(crashKillsEnv)); err == nil && v > 0 {
		kills = v
	}
	const nfiles, size = 4, 6 << 20
	files := map[string]origin.File{}
	for i := 0; i < nfiles; i++ {
		files[fmt.Sprintf("f%d.bin", i)] = origin.File{Seed: uint64(100 + i), Size: size}
	}
	_, url := startOrigin(t, files)
	cacheDir := t.TempDir()
	rng := rand.New(rand.NewSource(9))

	for k := 0; k < kills; k++ {
		mnt := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDaemonEnv+"=1", crashURLEnv+"="+url,
			crashCacheEnv+"="+cacheDir, crashMountEnv+"="+mnt)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(out).ReadString('\n')
			ready <- strings.TrimSpace(line)
		}()
		select {
		case line := <-ready:
			if line != "ready" {
				cmd.Process.Kill()
				cmd.Wait()
				if strings.Contains(line, "FUSE") && os.Getenv("PLAYHEAD_REQUIRE_FUSE") != "1" {
					t.Skip(line)
				}
				t.Fatalf("daemon did not start: %q", line)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("daemon did not become ready in 20 s")
		}

		// Heavy reads: every file at once, sequential and random, until the kill.
		var wg sync.WaitGroup
		for i := 0; i < nfiles; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				f, err := os.Open(fmt.Sprintf("%s/f%d.bin", mnt, i))
				if err != nil {
					return
				}
				defer f.Close()
				p := make([]byte, 256<<10)
				r := rand.New(rand.NewSource(int64(k*10 + i)))
				for off := int64(0); ; off += int64(len(p)) {
					if i%2 == 1 {
						off = r.Int63n(size)
					}
					if _, err := f.ReadAt(p, off%size); err != nil && !isEOF(err) {
						return // the daemon is gone
					}
				}
			}(i)
		}
		time.Sleep(time.Duration(100+rng.Intn(500)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		wg.Wait()
		if err := fusefs.ClearStale(mnt); err != nil {
			t.Fatalf("kill %d: stale mount not cleared: %v", k, err)
		}
	}

	// Mount the same cache again: every byte must be right, and cached blocks of the
	// killed daemons are reused.
	opts := testOptions(t)
	opts.Cache.Dir = cacheDir
	start := time.Now()
	m := mountHTTP(t, url, opts)
	t.Logf("%d kills; remount on the same cache took %v", kills, time.Since(start))
	for i := 0; i < nfiles; i++ {
		verifyWhole(t, m.Path(fmt.Sprintf("f%d.bin", i)), origin.Seed(uint64(100+i), 0), size)
	}
	st := m.FS.CacheStats()
	if st.Hits == 0 {
		t.Fatalf("no cached block survived %d kills (cache stats %+v)", kills, st)
	}
	t.Logf("after remount: %d cache hits, %d corrupt blocks dropped", st.Hits, st.Corrupt)
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

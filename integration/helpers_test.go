package integration

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/fusefs"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/internal/testlog"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/vfs"
)

// testOptions are vfs defaults with the cache in a fresh temporary directory.
func testOptions(t *testing.T) vfs.Options {
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 1 << 30
	// A failing test should not wait half a minute for a transient error to give up.
	opts.Fetch.IOTimeout = 5 * time.Second
	return opts
}

// startOrigin starts the built-in origin serving files on a loopback port; it stops when
// the test ends.
func startOrigin(t *testing.T, files map[string]origin.File) (*origin.Server, string) {
	t.Helper()
	o := origin.New(origin.Options{Files: files})
	url, err := o.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o, url
}

// behindLink starts a linkemu link with opts in front of the server at direct (a URL)
// and returns the link and its URL, ending in '/'. The link is closed with the test.
func behindLink(t *testing.T, direct string, opts linkemu.Options) (*linkemu.Link, string) {
	t.Helper()
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	link, err := linkemu.New(u.Host, opts)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := link.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	return link, "http://" + addr + "/"
}

// mount is a mounted vfs.FS.
type mount struct {
	Dir string
	FS  *vfs.FS

	t        *testing.T
	cacheDir string
	once     sync.Once
	unmount  func()
}

// Path is the path of the source path p inside the mount.
func (m *mount) Path(p string) string { return filepath.Join(m.Dir, filepath.FromSlash(p)) }

// Unmount unmounts and closes the FS; the test's cleanup does it otherwise. The cache
// directory may be mounted again afterwards.
func (m *mount) Unmount() { m.once.Do(m.unmount) }

// mountSource mounts src with opts in a temporary directory. Without FUSE the test is
// skipped, unless PLAYHEAD_REQUIRE_FUSE=1 (CI), where it fails.
func mountSource(t *testing.T, src source.Source, opts vfs.Options) *mount {
	t.Helper()
	fsys, err := vfs.New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server, err := fusefs.Mount(fsys, dir, fusefs.MountOptions{})
	if err != nil {
		fsys.Close()
		if os.Getenv("PLAYHEAD_REQUIRE_FUSE") == "1" {
			t.Fatalf("FUSE required but mount failed: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
	m := &mount{Dir: dir, FS: fsys}
	m.unmount = func() {
		// Stop is bounded even when a reader is still blocked in the mount.
		if _, err := fusefs.Stop(server, dir, testLogger(t)); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		fsys.Close()
		settleDir(t, opts.Cache.Dir)
	}
	t.Cleanup(m.Unmount)
	return m
}

// testLogger writes a logger's lines to t.Log.
func testLogger(t *testing.T) *slog.Logger { return testlog.New(t) }

// mountHTTP mounts the HTTP origin at url.
func mountHTTP(t *testing.T, url string, opts vfs.Options) *mount {
	t.Helper()
	src, err := httpsrc.New(url, httpsrc.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return mountSource(t, src, opts)
}

// verifyWhole reads the file at path with os.ReadFile (as cat does) and checks its size
// and every byte.
func verifyWhole(t *testing.T, path string, seed uint64, size int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if int64(len(data)) != size {
		t.Fatalf("%s: read %d bytes, want %d", path, len(data), size)
	}
	if err := pattern.Verify(seed, data, 0); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// readAtVerify reads n bytes at off of f and checks them; at the end of the file it
// expects the short count and io.EOF of io.ReaderAt.
func readAtVerify(f *os.File, seed uint64, size, off int64, n int) error {
	p := make([]byte, n)
	got, err := f.ReadAt(p, off)
	want := int(max(min(int64(n), size-off), 0))
	switch {
	case got != want:
		return fmt.Errorf("%s: ReadAt(%d bytes at %d) = %d, %v; want %d bytes", f.Name(), n, off, got, err, want)
	case err != nil && !(err == io.EOF && got < n):
		return fmt.Errorf("%s: ReadAt(%d bytes at %d): %w", f.Name(), n, off, err)
	}
	if err := pattern.Verify(seed, p[:got], off); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

// randomReads makes count ReadAt calls at random offsets (seeded by rngSeed) of up to
// maxLen bytes, some of them across the end of the file, and checks every byte.
func randomReads(path string, seed uint64, size int64, rngSeed int64, count, maxLen int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rng := rand.New(rand.NewSource(rngSeed))
	for i := range count {
		off := rng.Int63n(size)
		if i%8 == 7 {
			off = max(size-int64(rng.Intn(4096))-1, 0)
		}
		if err := readAtVerify(f, seed, size, off, 1+rng.Intn(maxLen)); err != nil {
			return err
		}
	}
	return nil
}

// listing describes the directory at path as "name size" lines ("name/" for
// directories), in os.ReadDir's order (sorted by name).
func listing(t *testing.T, path string) []string {
	t.Helper()
	des, err := os.ReadDir(path)
	if err != nil {
		t.Fatalf("list %s: %v", path, err)
	}
	var out []string
	for _, de := range des {
		if de.IsDir() {
			out = append(out, de.Name()+"/")
			continue
		}
		info, err := de.Info()
		if err != nil {
			t.Fatalf("stat %s/%s: %v", path, de.Name(), err)
		}
		out = append(out, fmt.Sprintf("%s %d", de.Name(), info.Size()))
	}
	return out
}

// wantListing is what listing should return for dir ("" for the root) of a tree given
// as path → size.
func wantListing(files map[string]int64, dir string) []string {
	lines := map[string]string{} // name → line
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	for p, size := range files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if name, _, isDir := strings.Cut(rest, "/"); isDir {
			lines[name] = name + "/"
		} else {
			lines[name] = fmt.Sprintf("%s %d", name, size)
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(lines)) {
		out = append(out, lines[name])
	}
	return out
}

// cacheFiles lists every file under dir with its size, sorted, so two snapshots compare.
func cacheFiles(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed while walking: the next snapshot sees it
		}
		if info, ierr := d.Info(); ierr == nil && !d.IsDir() {
			out = append(out, fmt.Sprintf("%s %d", p, info.Size()))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// settleDir waits until nothing changes under dir for a while (at most a few seconds).
//
// It works around a bug that vfs's TestCloseStopsCacheWrites reports: FS.Close returns
// while cache writers still run, and their late writes make t.TempDir's cleanup fail
// with "directory not empty", or race with a remount of the same cache directory.
func settleDir(t *testing.T, dir string) {
	const quiet, limit = 100 * time.Millisecond, 3 * time.Second
	prev := cacheFiles(dir)
	for start := time.Now(); time.Since(start) < limit; {
		time.Sleep(quiet)
		cur := cacheFiles(dir)
		if slices.Equal(cur, prev) {
			return
		}
		prev = cur
	}
	t.Logf("cache directory %s still changing %v after Close", dir, limit)
}

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/origin"
)

// The cache directory on a 4 MiB tmpfs, under a cache that believes it may use 64 MiB,
// read through a real mount: 24 MiB of files, read whole by four readers at once, then
// again with another program's ballast filling every byte the cache frees. Every read
// must succeed with the right bytes (from the origin when the cache cannot hold them),
// the daemon must not fail, and the cache must stay within the disk and its own limit.
// (cache/full_test.go proves the same at the cache's level.)
func TestCacheDiskFullThroughMount(t *testing.T) {
	if os.Geteuid() != 0 {
		// Not a FUSE requirement: CI without root still runs everything else.
		t.Skip("mounting a tmpfs for the cache needs root")
	}
	const (
		disk   = 4 << 20
		nfiles = 4
		size   = 6 << 20
	)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", disk)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	// Registered before the FUSE mount, so it runs after the mount's cleanup.
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })

	files := map[string]origin.File{}
	for i := range nfiles {
		files[fmt.Sprintf("f%d.bin", i)] = origin.File{Seed: uint64(300 + i), Size: size}
	}
	_, url := startOrigin(t, files)
	opts := testOptions(t)
	opts.Cache.Dir = filepath.Join(dir, "cache")
	opts.Cache.MaxBytes = 64 << 20
	m := mountHTTP(t, url, opts)

	var (
		mu       sync.Mutex
		errs     int
		bad      int64
		read     int64
		peakUsed int64
	)
	watchDisk := func() {
		var st syscall.Statfs_t
		if syscall.Statfs(dir, &st) == nil {
			used := int64(st.Blocks-st.Bfree) * st.Bsize
			mu.Lock()
			peakUsed = max(peakUsed, used)
			mu.Unlock()
		}
	}
	pass := func() {
		var wg sync.WaitGroup
		for i := range nfiles {
			wg.Go(func() {
				name := fmt.Sprintf("f%d.bin", i)
				data, err := os.ReadFile(m.Path(name))
				watchDisk()
				mu.Lock()
				defer mu.Unlock()
				read += int64(len(data))
				if err != nil || len(data) != size {
					errs++
					t.Errorf("%s: %d bytes, %v", name, len(data), err)
				}
				bad += badBytes(uint64(300+i), data, 0)
			})
		}
		wg.Wait()
	}
	start := time.Now()
	pass()
	firstTook := time.Since(start)
	afterFirst := m.FS.CacheStats()

	// Someone else's data takes every free byte: the cache cannot store anything new,
	// and a new mount (the kernel's page cache is per mount) must read from the origin.
	ballast, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := ballast.Write(chunk); err != nil {
			break
		}
	}
	ballast.Close()
	m.Unmount()
	m = mountHTTP(t, url, opts)
	secondStart := time.Now()
	pass()
	st := m.FS.CacheStats()
	fst := m.FS.FetchStats()
	figure(t, "%d MiB read through the mount (%d files, twice, one reader each, at once) with the cache on a %d MiB tmpfs and a %d MiB limit, "+
		"the second time with the disk filled by another file: %d read errors, %d bad bytes, first pass %v, second %v; "+
		"first pass: %d disk-full writes, limit lowered to %.1f MiB, %.1f MiB held; second: %d cache write errors, %.1f MiB held; "+
		"tmpfs peak use %.1f MiB",
		read>>20, nfiles, disk>>20, opts.Cache.MaxBytes>>20, errs, bad, firstTook.Round(time.Millisecond), time.Since(secondStart).Round(time.Millisecond),
		afterFirst.DiskFull, mib(afterFirst.Limit), mib(afterFirst.Bytes), fst.CacheWriteErr, mib(st.Bytes), mib(peakUsed))
	if bad != 0 {
		t.Errorf("%d bad bytes", bad)
	}
	if afterFirst.DiskFull == 0 {
		t.Errorf("the cache never found the disk full (%+v): the test tested nothing", afterFirst)
	}
	for _, s := range []struct {
		name  string
		bytes int64
		limit int64
	}{{"first pass", afterFirst.Bytes, afterFirst.Limit}, {"second pass", st.Bytes, st.Limit}} {
		if s.bytes > s.limit || s.bytes > disk {
			t.Errorf("%s: cache holds %d bytes, over its limit %d or the %d-byte disk", s.name, s.bytes, s.limit, disk)
		}
	}
}

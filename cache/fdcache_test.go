package cache

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// More files than the fd cache holds: every block still reads back, the descriptors
// stay bounded, and Close gives them all back.
func TestFdCacheBounded(t *testing.T) {
	o := testOptions(t)
	o.MaxBytes = 4 << 20
	warm, err := Open(testOptions(t)) // whatever the runtime opens once (netpoller) is open
	if err != nil {
		t.Fatal(err)
	}
	warm.Close()
	before := openFds(t)
	c, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]FileKey, 3*maxOpenFiles)
	for i := range keys {
		keys[i] = FileKey{Source: "http://origin.test/", Path: fmt.Sprintf("f%d", i), Version: "1-1"}
	}
	for round := range 2 {
		for _, k := range keys {
			if round == 0 {
				put(t, c, k, 0, testBS)
				put(t, c, k, 5, 100)
			}
			wantHit(t, c, k, 0, testBS)
			wantHit(t, c, k, 5, 100)
		}
	}
	perFile := 2 // data and index, and the data again where direct I/O is in use
	c.mu.Lock()
	if h := c.files[keys[len(keys)-1]].handles; h != nil && h.direct != nil {
		perFile = 3
	}
	c.mu.Unlock()
	if got, max := openFds(t)-before, perFile*maxOpenFiles+1; got > max { // +1: the lock file
		t.Errorf("%d descriptors open for %d files, want at most %d", got, len(keys), max)
	}
	c.fds.mu.Lock()
	if c.fds.n > maxOpenFiles {
		t.Errorf("fd cache lists %d files, max %d", c.fds.n, maxOpenFiles)
	}
	c.fds.mu.Unlock()
	// Forget closes the forgotten file's descriptors.
	wantHit(t, c, keys[0], 0, testBS)
	n := openFds(t)
	if err := c.Forget(keys[0]); err != nil {
		t.Fatal(err)
	}
	if got := openFds(t); got != n-perFile {
		t.Errorf("Forget left descriptors open: %d before, %d after", n, got)
	}
	checkConsistent(t, c)
	c.Close()
	if got := openFds(t); got != before {
		t.Errorf("%d descriptors open after Close, %d before Open", got, before)
	}
}

// A Get holding a file's descriptors keeps them valid while the fd cache lets them go:
// the last user closes them.
func TestFdCacheRefcount(t *testing.T) {
	c := openT(t, testOptions(t))
	put(t, c, keyA, 0, testBS)
	c.mu.Lock()
	fe := c.files[keyA]
	c.mu.Unlock()
	h, err := c.fds.acquire(fe, false)
	if err != nil {
		t.Fatal(err)
	}
	c.fds.purge()
	p := make([]byte, recLen)
	if err := preadFull(h.indexFd, p, 0); err != nil {
		t.Fatalf("descriptor closed under its user: %v", err)
	}
	c.fds.release(h)
	if _, err := h.index.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("file not closed after its last user released it: %v", err)
	}
	wantHit(t, c, keyA, 0, testBS) // reopened
}

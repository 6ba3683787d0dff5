package cache

import (
	"os"
	"testing"
	"time"
)

func TestLRUEviction(t *testing.T) {
	o := testOptions(t)
	o.MaxBytes = 8 * testBS
	c := openT(t, o)
	for b := int64(0); b < 8; b++ {
		put(t, c, keyA, b, testBS)
	}
	wantHit(t, c, keyA, 0, testBS) // 0 is now the most recently used; 1 the least
	put(t, c, keyA, 8, testBS)
	if c.Has(keyA, 1) || !c.Has(keyA, 0) || !c.Has(keyA, 8) {
		t.Fatalf("evicted the wrong block: has 0=%v 1=%v 8=%v", c.Has(keyA, 0), c.Has(keyA, 1), c.Has(keyA, 8))
	}
	if blockOnDisk(t, c, keyA, 1) {
		t.Error("evicted block still on disk (record or data)")
	}
	wantMiss(t, c, keyA, 1)
	// Has does not count as use: 2 goes next, even though we asked about it.
	c.Has(keyA, 2)
	put(t, c, keyB, 0, testBS)
	if c.Has(keyA, 2) {
		t.Error("Has refreshed the LRU position")
	}
	for b := int64(100); b < 140; b++ {
		put(t, c, keyB, b, testBS/2+int(b))
		if s := c.Stats(); s.Bytes > o.MaxBytes {
			t.Fatalf("Bytes %d over MaxBytes %d", s.Bytes, o.MaxBytes)
		}
	}
	// keyA lost all its blocks: its directory goes too.
	if _, err := os.Stat(fileDir(c, keyA)); !os.IsNotExist(err) {
		t.Errorf("directory of a fully evicted file survives: %v", err)
	}
	s := c.Stats()
	if s.Evictions == 0 || s.Files != 1 || s.Corrupt != 0 {
		t.Errorf("stats %+v", s)
	}
	checkConsistent(t, c)
	// An evicted file can come back.
	put(t, c, keyA, 0, testBS)
	wantHit(t, c, keyA, 0, testBS)
	checkConsistent(t, c)
}

// At startup, LRU order is the order of the records' last-use stamps.
func TestRestartLRUOrder(t *testing.T) {
	o := testOptions(t)
	c := openT(t, o)
	for b := int64(0); b < 10; b++ {
		put(t, c, keyA, b, testBS)
	}
	c.Close()
	// Make block b's age 10-b hours, except block 0, the newest of all.
	base := time.Now().Add(-24 * time.Hour)
	for b := int64(1); b < 10; b++ {
		setStamp(t, c, keyA, b, base.Add(time.Duration(b)*time.Hour))
	}
	o.MaxBytes = 5 * testBS // reopening smaller evicts the 5 oldest
	c = openT(t, o)
	for b := int64(0); b < 10; b++ {
		if want := b == 0 || b >= 6; c.Has(keyA, b) != want {
			t.Errorf("after restart Has(%d) = %v, want %v", b, !want, want)
		}
	}
	checkConsistent(t, c)
}

// Get refreshes a block's last-use stamp (at most once per touchInterval), so that a
// restart orders by use.
func TestGetTouchesStamp(t *testing.T) {
	c := openT(t, testOptions(t))
	clk := &fakeClock{t: time.Now()}
	c.now = clk.now
	put(t, c, keyA, 0, testBS)
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	setStamp(t, c, keyA, 0, old)
	wantHit(t, c, keyA, 0, testBS)
	if !stampOn(t, c, keyA, 0).Equal(old) {
		t.Fatal("Get touched a block written moments ago")
	}
	clk.t = clk.t.Add(touchInterval)
	wantHit(t, c, keyA, 0, testBS)
	if got := stampOn(t, c, keyA, 0); got.Unix() != clk.t.Unix() {
		t.Fatalf("stamp %v after Get, want %v", got, clk.t)
	}
	if s := c.Stats(); s.Corrupt != 0 {
		t.Errorf("Corrupt = %d", s.Corrupt)
	}
	checkConsistent(t, c)
}

package cache

import (
	"os"
	"slices"
	"testing"
)

// Every way a block can go bad on disk must be a miss, counted, removed, and repairable.
func TestCorruption(t *testing.T) { forWriteModes(t, testCorruption) }

func testCorruption(t *testing.T, put putFunc) {
	flip := func(mask byte) func([]byte) {
		return func(p []byte) {
			for i := range p {
				p[i] ^= mask
			}
		}
	}
	zero := func(p []byte) { clear(p) }
	// swapRanges exchanges n bytes at off of file p with n bytes at off2 of file q.
	swapRanges := func(t *testing.T, p string, off int64, q string, off2 int64, n int) {
		t.Helper()
		var a, b []byte
		modify(t, p, off, n, func(x []byte) { a = slices.Clone(x) })
		modify(t, q, off2, n, func(x []byte) { b = slices.Clone(x) })
		modify(t, p, off, n, func(x []byte) { copy(x, b) })
		modify(t, q, off2, n, func(x []byte) { copy(x, a) })
	}
	truncate := func(t *testing.T, p string, size int64) {
		t.Helper()
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	// reopen makes the cache open its files again, as it does after its fd cache lets
	// them go or after a restart: until then it reads the files it has open, and does
	// not see one deleted or replaced by name.
	reopen := func(c *Cache) { c.fds.purge() }
	all := []int64{0, 1, 2, 3}
	cases := []struct {
		name string
		// damage breaks block 1 of keyA (2 is a neighbour, keyB block 1 a stranger; the
		// truncations break block 3, the last); want lists the blocks of keyA that must
		// miss afterwards. The others must still hit.
		damage func(t *testing.T, c *Cache)
		want   []int64
	}{
		{"flip data byte", func(t *testing.T, c *Cache) {
			modify(t, dataFile(c, keyA), testBS+1000, 1, flip(0x10))
		}, []int64{1}},
		{"flip last data byte", func(t *testing.T, c *Cache) {
			modify(t, dataFile(c, keyA), 2*testBS-1, 1, flip(1))
		}, []int64{1}},
		{"flip record byte", func(t *testing.T, c *Cache) {
			modify(t, indexFile(c, keyA), recLen+recDataLen, 1, flip(1))
		}, []int64{1}},
		{"flip record stamp", func(t *testing.T, c *Cache) {
			modify(t, indexFile(c, keyA), recLen+recStamp, 1, flip(1))
		}, []int64{1}},
		{"truncate data", func(t *testing.T, c *Cache) {
			truncate(t, dataFile(c, keyA), 4*testBS-100)
		}, []int64{3}},
		{"truncate into record", func(t *testing.T, c *Cache) {
			truncate(t, indexFile(c, keyA), 3*recLen+recLen/2)
		}, []int64{3}},
		{"empty data file", func(t *testing.T, c *Cache) {
			truncate(t, dataFile(c, keyA), 0)
		}, all},
		{"empty index file", func(t *testing.T, c *Cache) {
			truncate(t, indexFile(c, keyA), 0)
		}, all},
		{"zeroed data (power loss)", func(t *testing.T, c *Cache) {
			modify(t, dataFile(c, keyA), testBS, testBS, zero)
		}, []int64{1}},
		{"zeroed record (power loss)", func(t *testing.T, c *Cache) {
			modify(t, indexFile(c, keyA), recLen, recLen, zero)
		}, []int64{1}},
		{"garbage record", func(t *testing.T, c *Cache) {
			modify(t, indexFile(c, keyA), recLen, recLen, func(p []byte) {
				copy(p, "this is not a block record at all, not even close to one!!!!!!")
			})
		}, []int64{1}},
		{"deleted (record zeroed, data punched)", func(t *testing.T, c *Cache) {
			modify(t, indexFile(c, keyA), recLen, recLen, zero)
			f, err := os.OpenFile(dataFile(c, keyA), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := punchHole(int(f.Fd()), testBS, testBS); err != nil {
				t.Fatal(err)
			}
		}, []int64{1}},
		{"data swapped with a neighbour", func(t *testing.T, c *Cache) {
			swapRanges(t, dataFile(c, keyA), testBS, dataFile(c, keyA), 2*testBS, testBS)
		}, []int64{1, 2}},
		{"records swapped with a neighbour", func(t *testing.T, c *Cache) {
			swapRanges(t, indexFile(c, keyA), recLen, indexFile(c, keyA), 2*recLen, recLen)
		}, []int64{1, 2}},
		{"data swapped with another key's block", func(t *testing.T, c *Cache) {
			swapRanges(t, dataFile(c, keyA), testBS, dataFile(c, keyB), testBS, testBS)
		}, []int64{1}},
		{"swapped with another key's block", func(t *testing.T, c *Cache) {
			swapRanges(t, dataFile(c, keyA), testBS, dataFile(c, keyB), testBS, testBS)
			swapRanges(t, indexFile(c, keyA), recLen, indexFile(c, keyB), recLen, recLen)
		}, []int64{1}},
		{"index deleted", func(t *testing.T, c *Cache) {
			if err := os.Remove(indexFile(c, keyA)); err != nil {
				t.Fatal(err)
			}
			reopen(c)
		}, all},
		{"data deleted", func(t *testing.T, c *Cache) {
			if err := os.Remove(dataFile(c, keyA)); err != nil {
				t.Fatal(err)
			}
			reopen(c)
		}, all},
		{"data replaced by a directory", func(t *testing.T, c *Cache) {
			os.Remove(dataFile(c, keyA))
			os.Mkdir(dataFile(c, keyA), 0o700)
			reopen(c)
		}, all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openT(t, testOptions(t))
			for b := int64(0); b < 4; b++ {
				put(t, c, keyA, b, testBS)
				put(t, c, keyB, b, testBS)
			}
			tc.damage(t, c)
			for _, b := range tc.want {
				wantMiss(t, c, keyA, b)
				if c.Has(keyA, b) {
					t.Errorf("block %d still indexed after a corrupt read", b)
				}
				if blockOnDisk(t, c, keyA, b) {
					t.Errorf("corrupt block %d not removed from disk", b)
				}
			}
			if s := c.Stats(); s.Corrupt != int64(len(tc.want)) || s.Hits != 0 {
				t.Errorf("Corrupt = %d Hits = %d, want %d and 0", s.Corrupt, s.Hits, len(tc.want))
			}
			for b := int64(0); b < 4; b++ {
				if !slices.Contains(tc.want, b) {
					wantHit(t, c, keyA, b, testBS)
				}
			}
			// The cache heals: store again, read again.
			for _, b := range tc.want {
				put(t, c, keyA, b, testBS)
				wantHit(t, c, keyA, b, testBS)
			}
			if s := c.Stats(); s.Corrupt != int64(len(tc.want)) {
				t.Errorf("Corrupt = %d after repair, want %d", s.Corrupt, len(tc.want))
			}
			put(t, c, keyB, 1, testBS) // the stranger may have been damaged too
			checkConsistent(t, c)
		})
	}
}

// A corrupt block found at restart (a record vouching for data past the end of the data
// file) never reaches the index, and one that looks fine to the scan is caught by its
// first Get.
func TestCorruptionAcrossRestart(t *testing.T) { forWriteModes(t, testCorruptionAcrossRestart) }

func testCorruptionAcrossRestart(t *testing.T, put putFunc) {
	o := testOptions(t)
	c := openT(t, o)
	put(t, c, keyA, 0, testBS)
	put(t, c, keyA, 1, testBS)
	put(t, c, keyA, 2, testBS)
	c.Close()
	modify(t, dataFile(c, keyA), testBS, 1, func(p []byte) { p[0] ^= 0xff })
	if err := os.Truncate(dataFile(c, keyA), 2*testBS+100); err != nil {
		t.Fatal(err)
	}
	c = openT(t, o)
	if c.Has(keyA, 2) {
		t.Error("block 2, cut short by a truncated data file, was indexed")
	}
	wantHit(t, c, keyA, 0, testBS)
	wantMiss(t, c, keyA, 1)
	wantMiss(t, c, keyA, 2)
	if s := c.Stats(); s.Corrupt != 1 || s.ScanRemoved != 1 {
		t.Errorf("Corrupt = %d ScanRemoved = %d, want 1 and 1", s.Corrupt, s.ScanRemoved)
	}
	checkConsistent(t, c)
}

// Blocks lost while the cache was closed are counted at Open: data whose index file is
// gone, and data whose record was zeroed (as a crash between a Put's two writes leaves).
func TestLostRecordsCountedAtOpen(t *testing.T) { forWriteModes(t, testLostRecordsCountedAtOpen) }

func testLostRecordsCountedAtOpen(t *testing.T, put putFunc) {
	o := testOptions(t)
	c := openT(t, o)
	for b := int64(0); b < 3; b++ {
		put(t, c, keyA, b, testBS)
		put(t, c, keyB, b, testBS)
	}
	c.Close()
	if err := os.Remove(indexFile(c, keyA)); err != nil {
		t.Fatal(err)
	}
	modify(t, indexFile(c, keyB), recLen, recLen, func(p []byte) { clear(p) })
	c = openT(t, o)
	if s := c.Stats(); s.ScanRemoved != 2 || s.Blocks != 2 {
		t.Errorf("ScanRemoved %d Blocks %d, want 2 (keyA's directory, keyB's orphan block 1) and 2", s.ScanRemoved, s.Blocks)
	}
	checkConsistent(t, c)
}

// putFunc stores the test pattern's block b of k, n bytes long.
type putFunc func(t *testing.T, c *Cache, k FileKey, b int64, n int)

// forWriteModes runs a corruption test with its blocks written through the page cache
// (Put) and with direct I/O (PutSumDirect): the two write paths differ (aligned
// buffers, O_DIRECT descriptors, the checksum taken from the caller), and damage must
// be caught the same way after either.
func forWriteModes(t *testing.T, test func(*testing.T, putFunc)) {
	t.Run("buffered", func(t *testing.T) { test(t, put) })
	t.Run("direct", func(t *testing.T) {
		requireDirect(t, t.TempDir())
		test(t, putDirectT)
	})
}

// putDirectT stores with PutSumDirect from an aligned buffer, failing the test if the
// block did not go direct: the direct path would then be untested.
func putDirectT(t *testing.T, c *Cache, k FileKey, b int64, n int) {
	t.Helper()
	data := alignedBlock(n)
	copy(data, blockOf(c, k, b, n))
	before := c.Stats().DirectWrites
	if err := putDirect(c, k, b, data); err != nil {
		t.Fatalf("PutSumDirect %v block %d: %v", k, b, err)
	}
	if c.Stats().DirectWrites != before+1 {
		t.Fatalf("PutSumDirect %v block %d was written through the page cache", k, b)
	}
}

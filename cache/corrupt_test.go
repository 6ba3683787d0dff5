package cache

import (
	"os"
	"testing"
)

// Every way a block file can go bad must be a miss, counted, removed, and repairable.
func TestCorruption(t *testing.T) {
	rewrite := func(t *testing.T, path string, f func([]byte) []byte) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	swap := func(t *testing.T, p, q string) {
		t.Helper()
		bp, _ := os.ReadFile(p)
		bq, _ := os.ReadFile(q)
		os.WriteFile(p, bq, 0o600)
		os.WriteFile(q, bp, 0o600)
	}
	cases := []struct {
		name string
		// damage breaks block 1 of keyA (2 is a neighbour, keyB block 1 a stranger);
		// want lists the blocks of keyA that must miss afterwards.
		damage func(t *testing.T, c *Cache)
		want   []int64
	}{
		{"flip data byte", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { b[hdrLen+1000] ^= 0x10; return b })
		}, []int64{1}},
		{"flip last data byte", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
		}, []int64{1}},
		{"flip header byte", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { b[hdrDataLen] ^= 1; return b })
		}, []int64{1}},
		{"truncate data", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { return b[:len(b)-100] })
		}, []int64{1}},
		{"truncate into header", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { return b[:hdrLen/2] })
		}, []int64{1}},
		{"empty file", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { return nil })
		}, []int64{1}},
		{"zeroed (power loss)", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { return make([]byte, len(b)) })
		}, []int64{1}},
		{"garbage header", func(t *testing.T, c *Cache) {
			rewrite(t, blockFile(c, keyA, 1), func(b []byte) []byte { copy(b, "this is not a block header at all!!!!!!"); return b })
		}, []int64{1}},
		{"deleted", func(t *testing.T, c *Cache) {
			if err := os.Remove(blockFile(c, keyA, 1)); err != nil {
				t.Fatal(err)
			}
		}, []int64{1}},
		{"swapped with a neighbour", func(t *testing.T, c *Cache) {
			swap(t, blockFile(c, keyA, 1), blockFile(c, keyA, 2))
		}, []int64{1, 2}},
		{"swapped with another key's block", func(t *testing.T, c *Cache) {
			swap(t, blockFile(c, keyA, 1), blockFile(c, keyB, 1))
		}, []int64{1}},
		{"replaced by a directory", func(t *testing.T, c *Cache) {
			os.Remove(blockFile(c, keyA, 1))
			os.Mkdir(blockFile(c, keyA, 1), 0o700)
		}, []int64{1}},
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
				if _, err := os.Lstat(blockFile(c, keyA, b)); !os.IsNotExist(err) {
					t.Errorf("corrupt block file %d not removed: %v", b, err)
				}
			}
			if s := c.Stats(); s.Corrupt != int64(len(tc.want)) || s.Hits != 0 {
				t.Errorf("Corrupt = %d Hits = %d, want %d and 0", s.Corrupt, s.Hits, len(tc.want))
			}
			wantHit(t, c, keyA, 0, testBS)
			wantHit(t, c, keyA, 3, testBS)
			// The cache heals: store again, read again.
			for _, b := range tc.want {
				put(t, c, keyA, b, testBS)
				wantHit(t, c, keyA, b, testBS)
			}
			if s := c.Stats(); s.Corrupt != int64(len(tc.want)) {
				t.Errorf("Corrupt = %d after repair, want %d", s.Corrupt, len(tc.want))
			}
			checkConsistent(t, c)
		})
	}
}

// A corrupt block found at restart (wrong size) never reaches the index, and one that
// looks fine to the scan is caught by its first Get.
func TestCorruptionAcrossRestart(t *testing.T) {
	o := testOptions(t)
	c := openT(t, o)
	put(t, c, keyA, 0, testBS)
	put(t, c, keyA, 1, testBS)
	c.Close()
	b, _ := os.ReadFile(blockFile(c, keyA, 1))
	b[hdrLen] ^= 0xff
	os.WriteFile(blockFile(c, keyA, 1), b, 0o600)
	c = openT(t, o)
	wantHit(t, c, keyA, 0, testBS)
	wantMiss(t, c, keyA, 1)
	if s := c.Stats(); s.Corrupt != 1 {
		t.Errorf("Corrupt = %d", s.Corrupt)
	}
}

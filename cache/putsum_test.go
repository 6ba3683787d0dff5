package cache

import "testing"

// A checksum computed piecewise is the one Put computes, and a block stored with it
// reads back; a block stored with a wrong one is a counted miss, never its bytes.
func TestPutSum(t *testing.T) {
	c := openT(t, testOptions(t))
	data := blockOf(c, keyA, 0, testBS)
	sum := uint32(0)
	for off := 0; off < len(data); off += 1000 {
		sum = Checksum(sum, data[off:min(off+1000, len(data))])
	}
	if whole := Checksum(0, data); sum != whole {
		t.Fatalf("piecewise checksum %08x, whole %08x", sum, whole)
	}
	if err := c.PutSum(keyA, 0, data, sum); err != nil {
		t.Fatal(err)
	}
	wantHit(t, c, keyA, 0, testBS)

	if err := c.PutSum(keyA, 1, blockOf(c, keyA, 1, testBS), sum); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, c, keyA, 1)
	if s := c.Stats(); s.Corrupt != 1 {
		t.Fatalf("a block stored with the wrong checksum counted %d corrupt, want 1", s.Corrupt)
	}
}

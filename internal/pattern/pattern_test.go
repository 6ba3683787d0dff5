package pattern

import (
	"bytes"
	"testing"
)

func TestFillMatchesByte(t *testing.T) {
	for _, off := range []int64{0, 1, 7, 8, 13, 1 << 20} {
		p := make([]byte, 37)
		Fill(3, p, off)
		for i := range p {
			if p[i] != Byte(3, off+int64(i)) {
				t.Fatalf("off %d byte %d differs", off, i)
			}
		}
		if err := Verify(3, p, off); err != nil {
			t.Fatal(err)
		}
		if err := Verify(3, p, off+8); err == nil {
			t.Fatalf("block shifted by 8 bytes verified at off %d", off)
		}
		if err := Verify(4, p, off); err == nil {
			t.Fatalf("other seed verified")
		}
	}
	a, b := make([]byte, 64), make([]byte, 64)
	Fill(1, a, 0)
	Fill(1, b, 64)
	if bytes.Equal(a, b) {
		t.Fatal("adjacent blocks are equal")
	}
}

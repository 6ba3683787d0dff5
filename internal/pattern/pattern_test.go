package pattern

import (
	"bytes"
	"fmt"
	"strings"
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

// The four-word rounds of Fill and Verify agree with Byte at any alignment, and Verify
// names the exact first wrong byte wherever it falls in a round.
func TestRoundsNameTheFirstWrongByte(t *testing.T) {
	for _, off := range []int64{0, 3, 8, 29, 4096} {
		p := make([]byte, 1000)
		Fill(5, p, off)
		for i := range p {
			if p[i] != Byte(5, off+int64(i)) {
				t.Fatalf("off %d byte %d differs from Byte", off, i)
			}
		}
		for _, bad := range []int{0, 5, 8, 31, 32, 40, 63, 500, 997, 999} {
			q := append([]byte(nil), p...)
			q[bad] ^= 0x10
			q[len(q)-1] ^= 0x01 // a later difference must not be the one named
			err := Verify(5, q, off)
			want := fmt.Sprintf("at offset %d:", off+int64(bad))
			if bad == len(q)-1 {
				want = fmt.Sprintf("at offset %d:", off+int64(len(q)-1))
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("off %d, byte %d flipped: %v, want %q", off, bad, err, want)
			}
		}
	}
}

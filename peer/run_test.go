package peer

import (
	"testing"
	"time"

	"github.com/playhead/playhead/source"
)

// runSource is a Source of node0 among names, with 16 KiB blocks in stripes of four.
func runSource(t *testing.T, names ...string) *Source {
	t.Helper()
	sec, err := NewSecret([]byte("0123456789abcdef-run-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.BlockSize, o.StripeBlocks = 16<<10, 4
	o.Self, o.SourceID, o.Secret, o.Members = names[0], "src", sec, NewStatic(names[0], names[1:])
	s, err := NewSource(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Runs follow the stripes: RunEnd falls on a stripe's end where the owner changes (or
// at the range's end, or maxRunBytes on), from any offset within the run; every block
// of a run has its owner; and Owns holds for exactly the runs this node owns.
func TestRunsFollowStripes(t *testing.T) {
	s := runSource(t, "node0", "node1", "node2")
	bs, ss := s.opts.BlockSize, s.stripeSize()
	v := source.Version{Size: 100*ss + 123, ModTime: time.Unix(1_700_000_000, 0)}
	owner := func(off int64) string {
		m, _ := s.currentRing().Owner(s.key("f.bin", v, off))
		return m.Name
	}
	changes := 0
	for off := int64(0); off < v.Size; {
		end := s.RunEnd("f.bin", v, off, v.Size)
		if end <= off || end > v.Size || end < v.Size && end%ss != 0 {
			t.Fatalf("RunEnd(%d) = %d: want a stripe's end past it, or the size %d", off, end, v.Size)
		}
		if mid := off + bs + 10; mid < end {
			if got := s.RunEnd("f.bin", v, mid, v.Size); got != end && end-off < maxRunBytes {
				t.Fatalf("RunEnd(%d) = %d inside the run [%d, %d)", mid, got, off, end)
			}
		}
		for b := off; b < end; b += bs {
			if owner(b) != owner(off) {
				t.Fatalf("block at %d is %s's in the run [%d, %d) of %s", b, owner(b), off, end, owner(off))
			}
		}
		if got, want := s.Owns("f.bin", v, off, end), owner(off) == "node0"; got != want {
			t.Fatalf("Owns(%d, %d) = %v, run of %s", off, end, got, owner(off))
		}
		if end < v.Size {
			if owner(end) == owner(off) {
				t.Fatalf("run [%d, %d) ends where %s's stripes go on", off, end, owner(off))
			}
			if s.Owns("f.bin", v, off, end+1) {
				t.Fatalf("Owns(%d, %d) holds past the owner's change at %d", off, end+1, end)
			}
			changes++
		}
		off = end
	}
	if changes < 30 {
		t.Errorf("the owner changed %d times over 101 stripes of three nodes, want about 67", changes)
	}
	// A cluster of one has no runs to cut.
	if one := runSource(t, "node0"); one.RunEnd("f.bin", v, ss+5, v.Size) != v.Size {
		t.Error("a cluster of one cut a run")
	}
}

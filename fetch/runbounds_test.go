package fetch

import (
	"testing"

	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
)

// stretchLog is a rangeLog whose source serves the file in stretches of stretch bytes
// from different tiers, as the peer tier serves each stripe from its owner.
type stretchLog struct {
	*rangeLog
	stretch int64
}

var _ = (RunBounds)((*stretchLog)(nil))

func (s *stretchLog) RunEnd(path string, v source.Version, off, end int64) int64 {
	return min((off/s.stretch+1)*s.stretch, end)
}

// crossing returns a range asked of the source that crosses the end of a stretch.
func (s *stretchLog) crossing(size int64) (source.Range, bool) {
	for _, r := range s.sorted() {
		end := r.End()
		if end < 0 {
			end = size
		}
		if end > (r.Off/s.stretch+1)*s.stretch {
			return r, true
		}
	}
	return source.Range{}, false
}

// No range crosses the end of a tier's stretch, whatever opened it: open-ended and
// bounded read-ahead (with its refills), a head read's tail, and a read of many blocks.
// Every byte is still read, each stretch on ranges of its own.
func TestRangesNeverCrossRunBounds(t *testing.T) {
	const stretch = 3 * testBlock // unaligned with every window below
	size := int64(40*testBlock + 100)
	scan := func(t *testing.T, fx *fixture) {
		for off := int64(0); off < size; off += testBlock {
			if err := fx.read(t, off, testBlock, ahead(1, off+testBlock, min(off+9*testBlock, size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		opts Options
		read func(t *testing.T, fx *fixture)
	}{
		{"open-ended read-ahead", openEnded(), scan},
		{"bounded read-ahead", testOptions(), scan},
		{"head and tail", testOptions(), func(t *testing.T, fx *fixture) {
			dec := readahead.Decision{Run: 1, Superseded: -1, New: true,
				Fetch: readahead.Range{Off: 0, End: testBlock}, Tail: readahead.Range{Off: size - 7*testBlock, End: size}}
			if err := fx.read(t, 0, 1000, dec); err != nil {
				t.Fatal(err)
			}
			if err := fx.read(t, size-7*testBlock, 7*testBlock, noDecision()); err != nil {
				t.Fatal(err)
			}
		}},
		{"many blocks at once", testOptions(), func(t *testing.T, fx *fixture) {
			if err := fx.read(t, 5*testBlock+10, 20*testBlock, noDecision()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log *stretchLog
			fx := newFixture(t, size, func(s source.Source) source.Source {
				log = &stretchLog{rangeLog: &rangeLog{Source: s}, stretch: stretch}
				return log
			}, c.opts)
			c.read(t, fx)
			if r, ok := log.crossing(size); ok {
				t.Fatalf("range [%d, +%d) crosses a stretch's end (every %d bytes); ranges %v",
					r.Off, r.Len, int64(stretch), log.sorted())
			}
		})
	}
}

package readahead

import "fmt"

// Range is the byte range [Off, End) of the file. It is empty when End <= Off; the
// ranges a Policy returns are then the zero Range, so empty ranges compare equal.
type Range struct{ Off, End int64 }

// Len returns the number of bytes in r, 0 when r is empty.
func (r Range) Len() int64 { return max(r.End-r.Off, 0) }

// Empty reports whether r holds no byte.
func (r Range) Empty() bool { return r.End <= r.Off }

// String formats r as "[off, end)" in bytes, or "[]" when empty.
func (r Range) String() string {
	if r.Empty() {
		return "[]"
	}
	return fmt.Sprintf("[%d, %d)", r.Off, r.End)
}

// blocks does the block arithmetic for one file: alignment to the block size and
// clipping to the file size.
type blocks struct {
	size  int64 // block size, > 0
	limit int64 // file size
}

func (b blocks) down(off int64) int64 { return off - off%b.size }

// up rounds off up to a block boundary. Callers pass offsets at most a window past the
// file size, so off+size-1 cannot overflow.
func (b blocks) up(off int64) int64 { return b.down(off + b.size - 1) }

// span returns [down(off), up(end)) clipped to [0, limit), the zero Range if empty.
// Only the final block can end unaligned, at the file size. The off >= limit check
// matters when off is an unaligned EOF: rounding it down would reach back into the
// final block.
func (b blocks) span(off, end int64) Range {
	r := Range{max(b.down(off), 0), min(b.up(end), b.limit)}
	if off >= b.limit || r.Empty() {
		return Range{}
	}
	return r
}

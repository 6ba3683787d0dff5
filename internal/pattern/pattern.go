// Package pattern makes deterministic file contents: every byte is a function of a seed
// and its offset, so a test can verify any byte at any offset without keeping a copy.
// It is the playhead equivalent of rclone's readers that check data against a pattern.
package pattern

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Byte returns the byte at off of the pattern for seed.
func Byte(seed uint64, off int64) byte {
	w := word(seed, uint64(off)>>3)
	return byte(w >> (8 * (uint64(off) & 7)))
}

// word mixes seed and the 8-byte word index (splitmix64 finaliser): cheap, and no two
// nearby words look alike, so a block served at the wrong offset is always caught.
func word(seed, i uint64) uint64 { return mix(start(seed, i)) }

// start is the splitmix64 state of word i: consecutive words have consecutive states,
// so the loops below step it by one instead of recomputing it.
func start(seed, i uint64) uint64 { return seed*0x9E3779B97F4A7C15 + i + 1 }

// mix is the splitmix64 finaliser.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Fill writes the pattern bytes [off, off+len(p)) into p.
func Fill(seed uint64, p []byte, off int64) {
	i := 0
	// Unaligned head.
	for ; i < len(p) && (off+int64(i))&7 != 0; i++ {
		p[i] = Byte(seed, off+int64(i))
	}
	// Four words per round: the bench's origin and its readers fill and check every byte
	// of a copy on the cores the daemon under test runs on, so these loops are kept
	// tight (independent words, one bounds check a round).
	z := start(seed, uint64(off+int64(i))>>3)
	for ; i+32 <= len(p); i += 32 {
		q := p[i : i+32 : i+32]
		binary.LittleEndian.PutUint64(q[0:], mix(z))
		binary.LittleEndian.PutUint64(q[8:], mix(z+1))
		binary.LittleEndian.PutUint64(q[16:], mix(z+2))
		binary.LittleEndian.PutUint64(q[24:], mix(z+3))
		z += 4
	}
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], word(seed, uint64(off+int64(i))>>3))
	}
	for ; i < len(p); i++ {
		p[i] = Byte(seed, off+int64(i))
	}
}

// Verify checks that p holds the pattern bytes starting at off. It returns an error naming
// the first wrong offset.
func Verify(seed uint64, p []byte, off int64) error {
	i := 0
	for ; i < len(p) && (off+int64(i))&7 != 0; i++ {
		if want := Byte(seed, off+int64(i)); p[i] != want {
			return mismatch(off+int64(i), p[i], want)
		}
	}
	// Four aligned words a round (see Fill); the first round with a difference is left
	// to the word-by-word loop below, which names the first wrong byte.
	z := start(seed, uint64(off+int64(i))>>3)
	for ; i+32 <= len(p); i += 32 {
		q := p[i : i+32 : i+32]
		d := binary.LittleEndian.Uint64(q[0:]) ^ mix(z)
		d |= binary.LittleEndian.Uint64(q[8:]) ^ mix(z+1)
		d |= binary.LittleEndian.Uint64(q[16:]) ^ mix(z+2)
		d |= binary.LittleEndian.Uint64(q[24:]) ^ mix(z+3)
		if d != 0 {
			break
		}
		z += 4
	}
	for i < len(p) {
		o := off + int64(i)
		if o&7 == 0 && i+8 <= len(p) {
			if binary.LittleEndian.Uint64(p[i:]) == word(seed, uint64(o)>>3) {
				i += 8
				continue
			}
		}
		if want := Byte(seed, o); p[i] != want {
			return mismatch(o, p[i], want)
		}
		i++
	}
	return nil
}

func mismatch(off int64, got, want byte) error {
	return fmt.Errorf("pattern mismatch at offset %d: got %#02x, want %#02x", off, got, want)
}

// Reader is an io.ReaderAt and io.ReadSeeker over a pattern file of Size bytes.
type Reader struct {
	Seed uint64
	Size int64
	pos  int64
}

// ReadAt implements io.ReaderAt.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.Size {
		return 0, io.EOF
	}
	n := len(p)
	if rem := r.Size - off; int64(n) > rem {
		n = int(rem)
	}
	Fill(r.Seed, p[:n], off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (r *Reader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.Size
	}
	if off < 0 {
		return 0, fmt.Errorf("pattern: negative seek")
	}
	r.pos = off
	return off, nil
}

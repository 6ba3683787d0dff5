package vfs_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
)

// A header parser's probe that reads past the ends a first read fetches waits more round
// trips on the first file of its kind; the next file of the kind fetches what that probe
// read of both ends with its first read, so the same probe costs two requests (head and
// tail at once) and no window. A file of another kind learns nothing.
//   - ffprobe reads an MKV's first cluster in order, 571 kB of the bench's clip: past the
//     512 KiB head (the second request for the rest of its header, and a window).
//   - ffprobe reads an MP4's head, then its moov at the end in order, 2.25 MiB here (a
//     film's): past the 256 KiB tail (the moov's first blocks, then its run's window).
func TestEndsLearnedFromEarlierProbesOfTheKind(t *testing.T) {
	const (
		size = 32 << 20
		moov = 2<<20 + 256<<10
	)
	type read struct{ off, n int64 }
	var mkv []read
	for off := int64(0); off < 640<<10; off += 64 << 10 {
		mkv = append(mkv, read{off, 64 << 10})
	}
	mkv = append(mkv, read{size - 64<<10, 64 << 10})
	mp4 := []read{{0, 64 << 10}, {size - moov, 64 << 10}}
	for off := int64(size - moov + 64<<10); off < size; off += 256 << 10 {
		mp4 = append(mp4, read{off, min(256<<10, size-off)})
	}
	for _, c := range []struct {
		name                 string
		first, second, other string
		reads                []read
		secondBytes, why     int64
	}{
		{name: "mkv", first: "a.mkv", second: "b.MKV", other: "c.bin", reads: mkv, secondBytes: 768<<10 + 256<<10},
		{name: "mp4 film", first: "a.mp4", second: "b.mp4", other: "c.mov", reads: mp4, secondBytes: 512<<10 + moov},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memsrc.New()
			for _, name := range []string{c.first, c.second, c.other} {
				mem.AddPattern(name, seed, size)
			}
			fsys := newFS(t, memsrc.WithLatency(mem, rtt))
			probe := func(name string) (opens, bytes int64) {
				before := mem.Stats()
				f := open(t, fsys, name)
				for _, r := range c.reads {
					if err := readAtVerify(f, seed, r.off, int(r.n)); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				// Ranges the close abandoned may deliver a block more: count them here.
				after := mem.Stats()
				for settled := false; !settled; {
					time.Sleep(10 * rtt)
					now := mem.Stats()
					settled, after = now == after, now
				}
				return after.Opens - before.Opens, after.BytesServed - before.BytesServed
			}
			if opens, _ := probe(c.first); opens < 3 {
				t.Errorf("%s: %d requests, want at least 3 (head and tail, then what they missed)", c.first, opens)
			}
			if opens, bytes := probe(c.second); opens != 2 || bytes > c.secondBytes {
				t.Errorf("%s: %d requests and %d bytes, want 2 (head and tail at once) and at most %d", c.second, opens, bytes, c.secondBytes)
			}
			if opens, _ := probe(c.other); opens < 3 {
				t.Errorf("%s, another kind: %d requests, want at least 3 (its kind learned nothing)", c.other, opens)
			}
		})
	}
}

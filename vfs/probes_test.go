package vfs_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
)

// probeCost runs f, a probe on a fresh handle, and returns the requests and bytes the
// origin served for it, once ranges its close abandoned have settled.
func probeCost(t *testing.T, mem *memsrc.Source, f func() error) (opens, bytes int64) {
	t.Helper()
	before := mem.Stats()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	after := mem.Stats()
	for settled := false; !settled; {
		time.Sleep(10 * rtt)
		now := mem.Stats()
		settled, after = now == after, now
	}
	return after.Opens - before.Opens, after.BytesServed - before.BytesServed
}

// A header parser that reads past the head a first read fetches (ffprobe reads an MKV's
// first cluster, 571 kB of the bench's clip) waits a second round trip for the rest of
// its header on the first file; the next file of the same kind fetches that much with
// its first read, so the same probe costs two requests (head and tail) and no window. A
// file of another kind keeps the plain head.
func TestHeadLearnedFromEarlierProbesOfTheKind(t *testing.T) {
	const (
		size  = 32 << 20
		chunk = 64 << 10
		read  = 640 << 10 // the parser's reads in order from the head: past 512 KiB
	)
	mem := memsrc.New()
	for _, name := range []string{"a.mkv", "b.MKV", "c.bin"} {
		mem.AddPattern(name, seed, size)
	}
	fsys := newFS(t, memsrc.WithLatency(mem, rtt))
	probe := func(name string) (int64, int64) {
		return probeCost(t, mem, func() error {
			f := open(t, fsys, name)
			for off := int64(0); off < read; off += chunk {
				if err := readAtVerify(f, seed, off, chunk); err != nil {
					return err
				}
			}
			if err := readAtVerify(f, seed, size-chunk, chunk); err != nil {
				return err
			}
			return f.Close()
		})
	}
	if opens, _ := probe("a.mkv"); opens < 3 {
		t.Errorf("first mkv: %d requests, want at least 3 (head, tail, the rest of the header)", opens)
	}
	opens, bytes := probe("b.MKV")
	if opens != 2 {
		t.Errorf("second mkv: %d requests, want 2 (head and tail at once)", opens)
	}
	if want := int64(768<<10 + 256<<10); bytes > want {
		t.Errorf("second mkv: %d bytes from the origin, want at most %d (three blocks of head, one of tail)", bytes, want)
	}
	if opens, _ := probe("c.bin"); opens < 3 {
		t.Errorf("another kind after two mkv probes: %d requests, want at least 3 (its kind learned nothing)", opens)
	}
}

// ffprobe on an MP4 written without faststart reads the head, then the moov at the
// end, in order (2.25 MiB here, a film's). The first file costs a round trip for both
// ends, then one for the moov's first blocks and one for the rest; the next file of the
// kind names the whole moov as its tail, and the probe costs two requests at once.
func TestTailLearnedFromEarlierProbesOfTheKind(t *testing.T) {
	const (
		size = 32 << 20
		moov = 2<<20 + 256<<10
	)
	mem := memsrc.New()
	for _, name := range []string{"a.mp4", "b.mp4"} {
		mem.AddPattern(name, seed, size)
	}
	fsys := newFS(t, memsrc.WithLatency(mem, rtt))
	probe := func(name string) (int64, int64) {
		return probeCost(t, mem, func() error {
			f := open(t, fsys, name)
			if err := readAtVerify(f, seed, 0, 64<<10); err != nil {
				return err
			}
			for off, n := int64(size-moov), 64<<10; off < size; off, n = off+int64(n), 256<<10 {
				if err := readAtVerify(f, seed, off, min(n, int(size-off))); err != nil {
					return err
				}
			}
			return f.Close()
		})
	}
	if opens, _ := probe("a.mp4"); opens < 3 {
		t.Errorf("first mp4: %d requests, want at least 3 (head and tail, the moov, its window)", opens)
	}
	opens, bytes := probe("b.mp4")
	if opens != 2 {
		t.Errorf("second mp4: %d requests, want 2 (head and moov at once)", opens)
	}
	if want := int64(512<<10 + moov); bytes > want {
		t.Errorf("second mp4: %d bytes from the origin, want at most %d (the head fetch and the moov)", bytes, want)
	}
}

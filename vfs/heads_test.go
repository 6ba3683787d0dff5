package vfs_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
)

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
	for _, name := range []string{"a.mkv", "b.MKV", "c.mp4"} {
		mem.AddPattern(name, seed, size)
	}
	fsys := newFS(t, memsrc.WithLatency(mem, rtt))
	probe := func(name string) (opens, bytes int64) {
		before := mem.Stats()
		f := open(t, fsys, name)
		for off := int64(0); off < read; off += chunk {
			if err := readAtVerify(f, seed, off, chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := readAtVerify(f, seed, size-chunk, chunk); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		// Ranges the close abandoned may deliver a block more: count them to this probe.
		after := mem.Stats()
		for settled := false; !settled; {
			time.Sleep(10 * rtt)
			now := mem.Stats()
			settled, after = now == after, now
		}
		return after.Opens - before.Opens, after.BytesServed - before.BytesServed
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
	if opens, _ := probe("c.mp4"); opens < 3 {
		t.Errorf("mp4 after two mkv probes: %d requests, want at least 3 (its kind learned nothing)", opens)
	}
}

package vfs_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
)

// A file whose head an earlier handle read, opened again and first read mid-file (a
// player's -ss after the kernel's page cache answered its header reads), has its
// read-ahead window go out with that first read. On a file nobody read before, the same
// lone read fetches its own blocks only.
func TestReopenedFileSeekEngagesReadAheadAtOnce(t *testing.T) {
	const (
		size   = 32 << 20
		block  = 256 << 10
		mid    = 16<<20 + 12345
		window = 5 << 20 // readahead.DefaultConfig's InitialWindow
	)
	served := func(reopen bool) int64 {
		mem := memsrc.New()
		mem.AddPattern("a.bin", seed, size)
		fsys := newFS(t, memsrc.WithLatency(mem, rtt))
		if reopen {
			f := open(t, fsys, "a.bin")
			if err := readAtVerify(f, seed, 0, 64<<10); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		before := mem.Stats().BytesServed
		f := open(t, fsys, "a.bin")
		if err := readAtVerify(f, seed, mid, 36<<10); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && mem.Stats().BytesServed-before < window {
			time.Sleep(rtt)
		}
		time.Sleep(20 * rtt) // anything else on its way arrives
		return mem.Stats().BytesServed - before
	}
	if got := served(true); got < window {
		t.Errorf("reopened file, first read mid-file: %d bytes from the origin, want its window (%d) at once", got, window)
	}
	if got := served(false); got >= window/2 {
		t.Errorf("file never read, a lone read mid-file: %d bytes from the origin, want its own blocks (about %d)", got, 2*block)
	}
}

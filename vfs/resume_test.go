package vfs_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
)

// A handle told that the kernel may answer its head reads (File.ResumeElsewhere), on a
// file whose head this FS holds, has its read-ahead window go out with its first read
// mid-file (a player's -ss after the kernel's page cache answered its header reads). On a
// file whose head nobody read, the hint does nothing: the same lone read fetches its own
// blocks only.
func TestResumeElsewhereEngagesReadAheadAtOnce(t *testing.T) {
	const (
		size   = 32 << 20
		mid    = 16<<20 + 12345
		window = 5 << 20 // readahead.DefaultConfig's InitialWindow
	)
	served := func(headRead bool) int64 {
		mem := memsrc.New()
		mem.AddPattern("a.bin", seed, size)
		fsys := newFS(t, memsrc.WithLatency(mem, rtt))
		if headRead {
			// Kept open: the second handle shares its fetch state, so the head is known
			// held whether or not its cache write has landed yet.
			f := open(t, fsys, "a.bin")
			if err := readAtVerify(f, seed, 0, 64<<10); err != nil {
				t.Fatal(err)
			}
		}
		before := mem.Stats().BytesServed
		f := open(t, fsys, "a.bin")
		f.ResumeElsewhere()
		if err := readAtVerify(f, seed, mid, 36<<10); err != nil {
			t.Fatal(err)
		}
		wait := time.Now().Add(30 * rtt)
		if headRead {
			wait = time.Now().Add(2 * time.Second) // a loaded machine: the window may be slow
		}
		for time.Now().Before(wait) && mem.Stats().BytesServed-before < window {
			time.Sleep(rtt)
		}
		return mem.Stats().BytesServed - before
	}
	if got := served(true); got < window {
		t.Errorf("head held, hinted first read mid-file: %d bytes from the origin, want its window (%d) at once", got, window)
	}
	if got := served(false); got >= window/2 {
		t.Errorf("head never read, hinted first read mid-file: %d bytes from the origin, want its own blocks (about 512 KiB)", got)
	}
}

package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
)

// A file opened again while the kernel keeps its pages (FOPEN_KEEP_CACHE), whose head the
// mount holds: the kernel may answer the new handle's header reads itself, so its first
// read that reaches us mid-file is a player's seek to play from (FFmpeg's -ss on a file
// opened before) and sends its read-ahead window at once, not a round trip later.
func TestReopenKeepingPagesSeeksWithItsWindow(t *testing.T) {
	const (
		size   = 32 << 20
		mid    = 16<<20 + 12345
		window = 5 << 20 // readahead.DefaultConfig's InitialWindow
	)
	mem := newMem(map[string]int64{"a.bin": size})
	dir, _ := mountMem(t, memsrc.WithLatency(mem, 2*time.Millisecond))
	p := filepath.Join(dir, "a.bin")
	first, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close() // open across the second: the head is held, landed or not
	head := make([]byte, 64<<10)
	if _, err := first.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	verifyFile(t, "a.bin", 0, head)

	before := mem.Stats().BytesServed
	second, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	buf := make([]byte, 36<<10)
	if _, err := second.ReadAt(buf, mid); err != nil {
		t.Fatal(err)
	}
	verifyFile(t, "a.bin", mid, buf)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && mem.Stats().BytesServed-before < window {
		time.Sleep(5 * time.Millisecond)
	}
	if got := mem.Stats().BytesServed - before; got < window {
		t.Errorf("reopened file, first read mid-file: %d bytes from the origin, want its window (%d) at once", got, window)
	}
}

package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// viewResult is written with writev only while go-fuse looks for the same method its own
// vector result has; if go-fuse renames it, replies silently fall back to a copy.
func TestViewResultIsWrittenAsVector(t *testing.T) {
	if _, ok := fuse.ReadResultVector(nil).(slicer); !ok {
		t.Fatal("go-fuse's ReadResultVector no longer has Slices(): viewResult needs the new method")
	}
}

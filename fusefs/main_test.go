package fusefs

import (
	"testing"

	"github.com/playhead/playhead/internal/fusewatch"
)

// The tests mount in this process: a hung test must not leave the binary stuck at exit.
func TestMain(m *testing.M) { fusewatch.Main(m) }

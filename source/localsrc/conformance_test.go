package localsrc_test

import (
	"os"
	"testing"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/localsrc"
	"github.com/playhead/playhead/source/sourcetest"
)

// A local directory keeps the source contract (issue 14).
func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
		d := sourcetest.NewDir(t)
		f := &sourcetest.Fixture{
			Source:     open(t, d.Root),
			Put:        d.Put,
			Delete:     d.Delete,
			NoThrottle: "a local directory does not throttle",
		}
		if os.Geteuid() == 0 {
			f.NoDenied = "running as root: file modes do not stop root"
		} else {
			// Taking every permission off the root refuses this client (and any other
			// but root). The source is opened before, as a mount opens it at start.
			f.Denied = func(t testing.TB) source.Source {
				src := open(t, d.Root)
				if err := os.Chmod(d.Root, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(d.Root, 0o755) })
				return src
			}
		}
		return f
	})
}

func open(t testing.TB, dir string) *localsrc.Source {
	t.Helper()
	src, err := localsrc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

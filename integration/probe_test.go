package integration

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/playhead/playhead/origin"
)

// A media scanner opens every file and reads a little at the start (container header)
// and a little at the end (index). playhead promises that this costs the origin little
// more than the bytes asked for: on average at most 1.5 MiB per file, though read-ahead
// and open-ended ranges could easily pull tens of MiB.
func TestProbeEconomy(t *testing.T) {
	const (
		files    = 10
		size     = 20 << 20
		probe    = 64 << 10
		maxBytes = 3 << 19 // 1.5 MiB: the product promise, per file on average
	)
	tree := map[string]origin.File{}
	for i := range files {
		tree[fmt.Sprintf("film%02d.mkv", i)] = origin.File{Seed: uint64(i), Size: size}
	}
	o, url := startOrigin(t, tree)
	m := mountHTTP(t, url, testOptions(t))
	if _, err := os.ReadDir(m.Dir); err != nil { // the listing costs bytes too
		t.Fatal(err)
	}
	o.ResetStats()
	for name, f := range tree {
		fh, err := os.Open(m.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{0, size - probe} {
			if err := readAtVerify(fh, f.Seed, size, off, probe); err != nil {
				t.Fatal(err)
			}
		}
		fh.Close()
	}
	// Read-ahead runs in the background: count what it had fetched once it has stopped.
	st := quiescentStats(o)
	perFile := st.BytesWritten / files
	t.Logf("probing %d files of %d MiB: %d requests, %d bytes from the origin, %.2f MiB per file",
		files, size>>20, st.Requests, st.BytesWritten, float64(perFile)/(1<<20))
	if perFile > maxBytes {
		t.Errorf("probing cost the origin %.2f MiB per file on average, promised at most %.2f MiB",
			float64(perFile)/(1<<20), float64(maxBytes)/(1<<20))
	}
}

// quiescentStats returns the origin's counters once they stop changing (or after a few
// seconds). Polling is the only way to see that background read-ahead has stopped.
func quiescentStats(o *origin.Server) origin.Stats {
	const quiet, limit = 200 * time.Millisecond, 5 * time.Second
	prev := o.Stats()
	for start := time.Now(); time.Since(start) < limit; {
		time.Sleep(quiet)
		cur := o.Stats()
		if cur == prev {
			return cur
		}
		prev = cur
	}
	return prev
}

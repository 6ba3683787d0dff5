package peer

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// fakeClock is a settable clock for the backoff.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The backoff doubles from backoffMin to backoffMax, one probe at a time tries a member
// whose backoff ended, a probe without a verdict lets the next run probe, and an
// answer ends the backoff.
func TestHealthBackoff(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	h := newHealth()
	h.now = clk.now
	if !h.admit("a") || !h.admit("a") {
		t.Fatal("a member never failed is not admitted")
	}
	want := backoffMin
	for i := 0; i < 8; i++ {
		h.failed("a")
		if got := h.downUntil("a").Sub(clk.now()); got != want {
			t.Fatalf("failure %d: down for %v, want %v", i+1, got, want)
		}
		if h.admit("a") {
			t.Fatalf("failure %d: admitted while down", i+1)
		}
		clk.advance(want)
		if !h.admit("a") {
			t.Fatalf("failure %d: not probed once the backoff ended", i+1)
		}
		if h.admit("a") {
			t.Fatalf("failure %d: a second run probes while the first does", i+1)
		}
		want = min(2*want, backoffMax)
	}
	h.released("a")
	if !h.admit("a") {
		t.Fatal("a released probe did not let the next run probe")
	}
	h.succeeded("a")
	if !h.admit("a") || !h.downUntil("a").IsZero() {
		t.Fatal("an answer did not end the backoff")
	}
	h.failed("a")
	if got := h.downUntil("a").Sub(clk.now()); got != backoffMin {
		t.Fatalf("the first failure after an answer: down for %v, want %v", got, backoffMin)
	}
}

// A static peer whose address refuses connections is dialed once per backoff, not once
// per run: the runs it owns go to the origin while it is down, and every byte is right.
func TestDeadStaticPeerIsDialedOncePerBackoff(t *testing.T) {
	var (
		dials atomic.Int64
		dead  string // the peer's address, which refuses connections (below)
	)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == dead {
			dials.Add(1)
		}
		return d.DialContext(ctx, network, addr)
	}
	origin := memsrc.New()
	const size = 64*16<<10 + 77
	origin.AddPattern("a.bin", 3, size)
	v, _ := origin.Version("a.bin")
	sec, err := NewSecret([]byte("0123456789abcdef-health-secret"))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.BlockSize, o.StripeBlocks = 16<<10, 2
	o.SourceID, o.Secret = "src", sec
	o.Client = &http.Client{Transport: tr}
	// The ring gives each member a share by the hash of its address, so two members
	// split the file's 33 runs unevenly, and the free port taken decides how many the
	// dead peer owns: a port that gives it several is kept.
	var s *Source
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead = ln.Addr().String()
		ln.Close()
		o.Self, o.Members = "127.0.0.1:1", NewStatic("127.0.0.1:1", []string{dead})
		if s, err = NewSource(origin, o); err != nil {
			t.Fatal(err)
		}
		if ownedRuns(s, "a.bin", v, dead) >= 5 {
			break
		}
		if try == 20 {
			t.Fatal("no free port gave the dead peer several runs of the file in 20 tries")
		}
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	s.health.now = clk.now

	deadRuns := readByRuns(t, s, "a.bin", v, 3, dead)
	if deadRuns < 5 {
		t.Fatalf("the dead peer owns %d runs of the file, want several", deadRuns)
	}
	steps := []struct {
		advance time.Duration
		dials   int64
	}{
		{0, 1},                        // the first run tried it, the others skipped it
		{backoffMin, 2},               // the backoff ended: one probe, failed
		{backoffMin, 2},               // down for 2 s now
		{backoffMin, 3},               // ... which ended: one probe
		{backoffMax + time.Second, 4}, // long past its 4 s: one probe
		{backoffMin / 2, 4},           // down for 8 s
	}
	for i, st := range steps {
		clk.advance(st.advance)
		if i > 0 {
			readByRuns(t, s, "a.bin", v, 3, dead)
		}
		if got := dials.Load(); got != st.dials {
			t.Fatalf("step %d: the dead peer was dialed %d times, want %d", i, got, st.dials)
		}
	}
	stats := s.Stats()
	if stats.PeerErrors != 4 || stats.SkippedDown != int64(len(steps))*deadRuns-4 || stats.PeerRuns != 0 {
		t.Errorf("stats %+v: want 4 failed tries and every other run of the dead peer skipped", stats)
	}
}

// ownedRuns is how many of path's runs (one range per RunEnd, as fetch reads) member
// owner owns, read from the ring alone.
func ownedRuns(s *Source, path string, v source.Version, owner string) int64 {
	var owned int64
	for off := int64(0); off < v.Size; {
		end := s.RunEnd(path, v, off, v.Size)
		if s.nextRun(s.currentRing(), path, v, off, end).owner.Name == owner {
			owned++
		}
		off = end
	}
	return owned
}

// readByRuns reads path run by run, as fetch does (one range per RunEnd), checks every
// byte against the pattern of seed, and returns how many runs member owner owns.
func readByRuns(t *testing.T, s *Source, path string, v source.Version, seed uint64, owner string) int64 {
	t.Helper()
	var owned int64
	for off := int64(0); off < v.Size; {
		end := s.RunEnd(path, v, off, v.Size)
		if r := s.nextRun(s.currentRing(), path, v, off, end); r.owner.Name == owner {
			owned++
		}
		b, err := s.OpenRange(context.Background(), path, source.Range{Off: off, Len: end - off}, v)
		if err != nil {
			t.Fatalf("open [%d, %d): %v", off, end, err)
		}
		got, err := io.ReadAll(b)
		b.Close()
		if err != nil {
			t.Fatalf("read [%d, %d): %v", off, end, err)
		}
		want := make([]byte, end-off)
		pattern.Fill(seed, want, off)
		if !bytes.Equal(got, want) {
			t.Fatalf("bytes of [%d, %d) differ from the origin's", off, end)
		}
		off = end
	}
	return owned
}

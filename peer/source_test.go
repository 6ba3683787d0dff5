package peer_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

const fileSize = 40*testBlock + 123 // an odd tail, so the last block is short

// Every block is read from the origin once across the cluster: the owner serves, the
// others forward.
func TestOwnersServeOthersForward(t *testing.T) {
	origin := memsrc.New()
	v := addFile(t, origin, "dir/a.bin", 7, fileSize)
	nodes, _ := cluster(t, origin, 3, nil)
	origin.ResetStats()
	readAll(t, nodes[0].src, "dir/a.bin", 7, source.Range{Off: 0, Len: -1}, v)
	st := nodes[0].src.Stats()
	if st.PeerRuns == 0 || st.OriginRuns == 0 || st.Bypassed != 0 {
		t.Errorf("stats %+v: want runs from peers and from the origin, none bypassed", st)
	}
	if got := origin.Stats().BytesServed; got != fileSize {
		t.Errorf("origin served %d bytes, want the file's %d once", got, fileSize)
	}
	// Per member: self first, every member static, and the peers' rows add up to the
	// totals.
	ms := nodes[0].src.MemberStats()
	var runs, bytes int64
	for i, m := range ms {
		runs, bytes = runs+m.Runs, bytes+m.Bytes
		if m.Self != (i == 0) || m.Self != (m.Name == "node0") || m.State != peer.StateStatic || m.Failures != 0 {
			t.Errorf("member %d: %+v: want node0 first as self, all static, no failure", i, m)
		}
	}
	if len(ms) != 3 || runs != st.PeerRuns || bytes != st.PeerBytes || ms[1].Bytes == 0 || ms[2].Bytes == 0 {
		t.Errorf("members %+v: want 3 whose runs and bytes add up to %+v", ms, st)
	}
	for _, nd := range nodes[1:] {
		if s := nd.serve.Stats(); s.Served == 0 || s.Unauthorized+s.Refused+s.NotThisVersion+s.Errors != 0 {
			t.Errorf("server %s stats %+v: want ranges served, none refused", nd.name, s)
		}
	}
	// A range that starts and ends inside blocks.
	readAll(t, nodes[1].src, "dir/a.bin", 7, source.Range{Off: testBlock/2 + 3, Len: 5*testBlock + 11}, v)
}

// bypassCase breaks node 1 in one way; the read on node 0 still succeeds from the
// origin, and every bypass is counted in the fields check adds up. A failure marks the
// peer down, so check adds SkippedDown for those: a 409 or a refusal is no failure.
func bypassCase(t *testing.T, tune func(*peer.Options), breakNode func(t *testing.T, nodes []*node), check func(peer.Stats) int64) {
	t.Helper()
	origin := memsrc.New()
	v := addFile(t, origin, "a.bin", 9, fileSize)
	nodes, _ := cluster(t, origin, 2, tune)
	breakNode(t, nodes)
	readAll(t, nodes[0].src, "a.bin", 9, source.Range{Off: 0, Len: -1}, v)
	st := nodes[0].src.Stats()
	if st.PeerRuns != 0 || st.Bypassed == 0 || check(st) != st.Bypassed {
		t.Errorf("stats %+v: want every peer run bypassed for the reason tested", st)
	}
}

func setHandler(nd *node, h http.Handler) { nd.handler.Store(&h) }

func TestPeerDownIsBypassed(t *testing.T) {
	var n0 *node
	bypassCase(t, nil, func(t *testing.T, nodes []*node) {
		n0 = nodes[0]
		nodes[1].server.Close() // refused connections from here on
	}, func(s peer.Stats) int64 { return s.PeerErrors + s.SkippedDown })
	// The failure is node1's: counted, and it is down, its other runs skipped.
	ms := n0.src.MemberStats()
	if m := ms[1]; len(ms) != 2 || m.Name != "node1" || m.Failures != 1 || m.DownUntil.IsZero() ||
		m.Bypassed[peer.BypassError] != 1 || m.Bypassed[peer.BypassDown] == 0 {
		t.Errorf("members %+v: want node1 failed once, down, its other runs skipped", ms)
	}
}

func TestSlowPeerIsHedged(t *testing.T) {
	tune := func(o *peer.Options) { o.HedgeFloor, o.HedgeCeiling = 20*time.Millisecond, 50*time.Millisecond }
	bypassCase(t, tune, func(t *testing.T, nodes []*node) {
		inner := *nodes[1].handler.Load()
		setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
				return
			}
			inner.ServeHTTP(w, r)
		}))
	}, func(s peer.Stats) int64 { return s.Hedged + s.SkippedDown })
}

func TestOtherVersionIsBypassed(t *testing.T) {
	bypassCase(t, nil, func(t *testing.T, nodes []*node) {
		setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "not this version", peer.StatusNotThisVersion)
		}))
	}, func(s peer.Stats) int64 { return s.NotThisVersion })
}

// An owner whose own origin failed the range answers 502: the run goes to the origin,
// counted as an error, and the owner is not marked down, since it answered.
func TestOwnersOriginFailureIsNoPeerFailure(t *testing.T) {
	var n0 *node
	bypassCase(t, nil, func(t *testing.T, nodes []*node) {
		n0 = nodes[0]
		setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "origin failed", http.StatusBadGateway)
		}))
	}, func(s peer.Stats) int64 { return s.PeerErrors })
	if ms := n0.src.MemberStats(); len(ms) != 2 || ms[1].Failures != 0 || !ms[1].DownUntil.IsZero() {
		t.Errorf("members %+v: want node1 not failed and not down after 502s", ms)
	}
}

func TestWrongSecretIsRefused(t *testing.T) {
	other := mustSecret("another-secret-of-enough-length")
	bypassCase(t, nil, func(t *testing.T, nodes []*node) {
		h, err := peerserve.New(peerserve.Options{SourceID: testSecret.SourceID("mem:test"),
			Verifier: peer.NewVerifier(other, []string{nodes[1].server.Listener.Addr().String()}), Files: srcFiles{nodes[1].src}})
		if err != nil {
			t.Fatal(err)
		}
		setHandler(nodes[1], h)
	}, func(s peer.Stats) int64 { return s.Refused })
}

// A peer that cuts its answer short (after its headers) is continued from the origin,
// and marked down: its later runs skip it.
func TestCutAnswerContinuesFromOrigin(t *testing.T) {
	origin := memsrc.New()
	v := addFile(t, origin, "a.bin", 9, fileSize)
	nodes, _ := cluster(t, origin, 2, nil)
	inner := *nodes[1].handler.Load()
	setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(&cutWriter{ResponseWriter: w, left: 100}, r)
	}))
	readAll(t, nodes[0].src, "a.bin", 9, source.Range{Off: 0, Len: -1}, v)
	st := nodes[0].src.Stats()
	if st.PeerRuns == 0 || st.PeerErrors != st.PeerRuns || st.SkippedDown == 0 || st.Bypassed != st.PeerErrors+st.SkippedDown {
		t.Errorf("stats %+v: want every opened peer run cut and continued, the rest skipped", st)
	}
}

// cutWriter drops the connection after left body bytes.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		c.ResponseWriter.Write(p[:c.left])
		c.left = 0
		hj, _ := c.ResponseWriter.(http.Hijacker)
		if conn, _, err := hj.Hijack(); err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
		return 0, http.ErrHandlerTimeout
	}
	c.left -= len(p)
	return c.ResponseWriter.Write(p)
}

// A peer that sends part of its answer and then nothing (a host gone without a reset)
// is hedged mid-answer: the run goes on from the origin after the threshold, not after
// the fetcher's stall timeout.
func TestStalledAnswerIsHedged(t *testing.T) {
	origin := memsrc.New()
	v := addFile(t, origin, "a.bin", 9, fileSize)
	nodes, _ := cluster(t, origin, 2, func(o *peer.Options) {
		o.HedgeFloor, o.HedgeCeiling = 20*time.Millisecond, 50*time.Millisecond
	})
	inner := *nodes[1].handler.Load()
	setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(&stallWriter{ResponseWriter: w, left: 100, done: r.Context().Done()}, r)
	}))
	readAll(t, nodes[0].src, "a.bin", 9, source.Range{Off: 0, Len: -1}, v)
	// Each peer run opened (its first bytes came) and was then hedged for the origin.
	// A peer that answered is not marked down for a stalled body (body.go), so no run
	// skipped it.
	if st := nodes[0].src.Stats(); st.PeerRuns == 0 || st.Hedged != st.PeerRuns || st.SkippedDown != 0 || st.Bypassed != st.Hedged {
		t.Errorf("stats %+v: want every peer run hedged mid-answer, none skipped", st)
	}
}

// stallWriter sends left body bytes, then blocks until the request ends.
type stallWriter struct {
	http.ResponseWriter
	left int
	done <-chan struct{}
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if len(p) > s.left {
		s.ResponseWriter.Write(p[:s.left])
		s.left = 0
		s.ResponseWriter.(http.Flusher).Flush()
		<-s.done
		return 0, http.ErrHandlerTimeout
	}
	s.left -= len(p)
	return s.ResponseWriter.Write(p)
}

// With the default hedge options, a peer that accepts requests and never answers is
// bypassed within the threshold (the ceiling, for a peer never measured), then marked
// down: the read is not held up run after run, and every byte is right.
func TestSilentPeerIsHedgedAtDefaults(t *testing.T) {
	origin := memsrc.New()
	v := addFile(t, origin, "a.bin", 9, fileSize)
	nodes, _ := cluster(t, origin, 2, func(o *peer.Options) {
		d := peer.DefaultOptions()
		o.HedgeFloor, o.HedgeCeiling = d.HedgeFloor, d.HedgeCeiling
	})
	setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	start := time.Now()
	readAll(t, nodes[0].src, "a.bin", 9, source.Range{Off: 0, Len: -1}, v)
	took := time.Since(start)
	st := nodes[0].src.Stats()
	if st.Hedged == 0 || st.PeerRuns != 0 || st.Bypassed != st.Hedged+st.SkippedDown {
		t.Errorf("stats %+v: want the silent peer's runs hedged, then skipped while down", st)
	}
	// The runs opened at once are hedged together after one ceiling; the later ones
	// skip the peer. Three ceilings leave room for the origin reads on a loaded machine.
	if limit := 3 * peer.DefaultHedgeCeiling; took > limit {
		t.Errorf("read took %v with a silent peer, want under %v", took, limit)
	}
}

// A range read from the node that owns it is held there (fetch.HeldBody): the reader
// need not cache it. Bytes continued from the origin after a cut answer are held by no
// node, and with LocalCopy nothing counts as held.
func TestOwnersBytesAreHeld(t *testing.T) {
	for _, tc := range []struct {
		name           string
		localCopy, cut bool
		want           bool
	}{
		{"from its owner", false, false, true},
		{"with LocalCopy", true, false, false},
		{"cut and continued from the origin", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := memsrc.New()
			v := addFile(t, origin, "a.bin", 9, fileSize)
			nodes, _ := cluster(t, origin, 2, func(o *peer.Options) { o.LocalCopy = tc.localCopy })
			if tc.cut {
				inner := *nodes[1].handler.Load()
				setHandler(nodes[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					inner.ServeHTTP(&cutWriter{ResponseWriter: w, left: 100}, r)
				}))
			}
			const stripe = testBlock * testStripe
			off := int64(0)
			for ; off < fileSize && nodes[0].src.Owns("a.bin", v, off, off+stripe); off += stripe {
			}
			if off >= fileSize {
				t.Fatal("node 0 owns every stripe")
			}
			b, err := nodes[0].src.OpenRange(context.Background(), "a.bin", source.Range{Off: off, Len: stripe}, v)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if n, err := io.Copy(io.Discard, b); err != nil || n != stripe {
				t.Fatalf("read %d bytes (%v), want %d", n, err, stripe)
			}
			h, ok := b.(interface{ HeldFrom(int64) bool })
			if !ok {
				t.Fatalf("a body of a run from a peer (%T) cannot tell what its owner holds", b)
			}
			if got := h.HeldFrom(off); got != tc.want {
				t.Errorf("HeldFrom(%d) = %v, want %v", off, got, tc.want)
			}
			st := nodes[0].src.Stats()
			if tc.cut && (st.PeerRuns == 0 || st.PeerErrors == 0 || st.OriginBytes == 0) ||
				!tc.cut && (st.PeerBytes != stripe || st.OriginBytes != 0) {
				t.Errorf("stats %+v: want the stripe from its owner, continued from the origin when cut", st)
			}
		})
	}
}

package peer

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A silent peer is given up on after the budget; one that said it received the
// request, or that sends on other requests, is waited for up to the limit; a stopped
// watch never fires.
func TestWatchPeer(t *testing.T) {
	const budget, limit = 100 * time.Millisecond, time.Second
	cases := []struct {
		name string
		act  func(h *hedger, acked *atomic.Bool) // run at 50 ms
		want time.Duration                       // when it fires
	}{
		{"silent", func(*hedger, *atomic.Bool) {}, budget},
		{"acked", func(_ *hedger, a *atomic.Bool) { a.Store(true) }, limit},
		{"heard once on another request", func(h *hedger, _ *atomic.Bool) { h.heardFrom("p") }, 50*time.Millisecond + budget},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHedger(DefaultOptions())
				var acked atomic.Bool
				start := time.Now()
				var fired atomic.Int64
				h.watchPeer("p", budget, limit, &acked, func() { fired.Store(int64(time.Since(start))) })
				time.Sleep(50 * time.Millisecond)
				c.act(h, &acked)
				time.Sleep(2 * limit)
				if got := time.Duration(fired.Load()); got != c.want {
					t.Errorf("fired after %v, want %v", got, c.want)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		h := newHedger(DefaultOptions())
		var fired atomic.Bool
		w := h.watchPeer("p", budget, limit, nil, func() { fired.Store(true) })
		if !w.stop() {
			t.Error("stop before the budget reported the watch fired")
		}
		time.Sleep(2 * limit)
		if fired.Load() || w.stop() {
			t.Error("a stopped watch fired, or stopped twice")
		}
	})
}

package peer

import (
	"sync"
	"sync/atomic"
	"time"
)

// watch gives up on one wait for a peer (its headers, or the next bytes of its answer)
// once the peer has been silent for budget: nothing on this request, nor on any other
// request to it. Up to limit after the start, the wait is extended for
//   - a peer that said it received this request (acked, peer.StatusReceived): it is
//     alive and working on it, and may have to ask its origin first;
//   - a peer that sends on other requests meanwhile: it is alive and busy (a burst of
//     requests queued behind one another).
//
// Giving up on either would only read the same stripe from the origin twice. A peer
// that is down or hung sends nothing, and is given up on after budget.
type watch struct {
	h      *hedger
	addr   string
	budget time.Duration
	end    time.Time // start + limit
	fire   func()
	acked  *atomic.Bool // nil, or true once the peer said it received the request

	mu   sync.Mutex
	t    *time.Timer // guarded by mu
	done bool        // fired or stopped; guarded by mu
}

// watchPeer calls fire once addr has been silent for budget (and at limit after now at
// the latest), unless stop is called first. acked may be nil.
func (h *hedger) watchPeer(addr string, budget, limit time.Duration, acked *atomic.Bool, fire func()) *watch {
	now := time.Now()
	w := &watch{h: h, addr: addr, budget: budget, end: now.Add(max(limit, budget)), fire: fire, acked: acked}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t = time.AfterFunc(budget, w.check)
	return w
}

// check fires, or waits on while the peer is acked or was heard within the budget.
func (w *watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	now := time.Now()
	if left := w.end.Sub(now); left > 0 {
		if w.acked != nil && w.acked.Load() {
			w.t = time.AfterFunc(left, w.check)
			return
		}
		if silent := now.Sub(w.h.lastHeard(w.addr)); silent < w.budget {
			w.t = time.AfterFunc(min(w.budget-silent, left), w.check)
			return
		}
	}
	w.done = true
	w.fire()
}

// stop ends the watch; it reports false when the watch has fired already.
func (w *watch) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	w.done = true
	w.t.Stop()
	return true
}

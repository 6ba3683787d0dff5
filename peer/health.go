package peer

import (
	"sync"
	"time"
)

// Backoff of a member whose request failed: it is marked down for backoffMin, doubled
// at each failure in a row up to backoffMax, and a success ends it. 1 s spares the
// runs of a burst the cost of a dead peer (a connect error, or the hedge threshold
// each) after the first; 30 s caps how long a peer that came back is passed over, a
// few seconds of origin reads at most once the next probe answers.
const (
	backoffMin = time.Second
	backoffMax = 30 * time.Second
)

// health remembers which members failed, by member name, so that a dead peer costs one
// run a backoff rather than every run. Safe for concurrent use.
//
// Invariant: while a member is down none of its runs tries it; when its backoff ends,
// exactly one run (the probe) tries it, and its outcome either ends the backoff or
// starts a longer one. A run that ends without a verdict (its reader went away)
// releases the probe for the next run.
type health struct {
	now func() time.Time

	mu      sync.Mutex
	members map[string]*memberHealth // guarded by mu
}

type memberHealth struct {
	failures  int       // failures in a row
	downUntil time.Time // zero: up
	probing   bool      // a run is trying the member after its backoff
}

func newHealth() *health { return &health{now: time.Now, members: map[string]*memberHealth{}} }

// admit reports whether a run may try member name now: it is up, or its backoff is
// over and no other run is probing it (this run then is the probe).
func (h *health) admit(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.members[name]
	switch {
	case m == nil || m.downUntil.IsZero():
		return true
	case m.probing || h.now().Before(m.downUntil):
		return false
	}
	m.probing = true
	return true
}

// failed marks name down for its next backoff.
func (h *health) failed(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.members[name]
	if m == nil {
		m = &memberHealth{}
		h.members[name] = m
	}
	m.failures++
	backoff := backoffMax
	if m.failures <= 5 { // 1 s << 5 is past backoffMax already
		backoff = min(backoffMin<<(m.failures-1), backoffMax)
	}
	m.downUntil, m.probing = h.now().Add(backoff), false
}

// succeeded marks name up: it answered.
func (h *health) succeeded(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.members, name)
}

// released ends a probe of name that had no verdict, so the next run probes instead.
func (h *health) released(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.members[name]; m != nil {
		m.probing = false
	}
}

// downUntil is when name's backoff ends; zero while it is up.
func (h *health) downUntil(name string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.members[name]; m != nil {
		return m.downUntil
	}
	return time.Time{}
}

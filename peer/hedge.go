package peer

import (
	"sync"
	"time"
)

// ewmaWeight is the weight of a new sample in the moving averages of first-byte times:
// 0.2 follows a change within about ten answers while one slow answer moves the average
// by a fifth of its excess only.
const ewmaWeight = 0.2

// hedger keeps the usual first-byte time of each peer and of the origin, and from them
// the hedge threshold of a peer request. Safe for concurrent use.
//
// The threshold includes the origin's usual first-byte time because an owner that does
// not hold a block fetches it from the origin before its first byte: a threshold below
// that would send every block cold on its owner to the origin twice, once by the owner
// and once by the reader that gave up on it.
type hedger struct {
	mult          float64
	floor, ceil   time.Duration
	mu            sync.Mutex
	peers         map[string]time.Duration // by address; guarded by mu
	origin        time.Duration            // 0 while unmeasured; guarded by mu
	originSampled bool                     // guarded by mu
}

func newHedger(o Options) *hedger {
	return &hedger{mult: o.HedgeMult, floor: o.HedgeFloor, ceil: o.HedgeCeiling, peers: map[string]time.Duration{}}
}

// threshold is how long a request to addr may take to its first byte. A peer never
// measured gets the ceiling: nothing says it is usually faster.
func (h *hedger) threshold(addr string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	usual, ok := h.peers[addr]
	if !ok {
		return h.ceil
	}
	t := time.Duration(h.mult*float64(usual)) + h.origin
	return min(max(t, h.floor), h.ceil)
}

func ewma(old, sample time.Duration, first bool) time.Duration {
	if first {
		return sample
	}
	return old + time.Duration(ewmaWeight*float64(sample-old))
}

// peerAnswered records a peer's first-byte time.
func (h *hedger) peerAnswered(addr string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.peers[addr]
	h.peers[addr] = ewma(old, d, !ok)
}

// originAnswered records the origin's first-byte time.
func (h *hedger) originAnswered(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.origin = ewma(h.origin, d, !h.originSampled)
	h.originSampled = true
}

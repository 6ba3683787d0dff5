package peer

import (
	"sync"
	"time"
)

// ewmaWeight is the weight of a new sample in the moving averages of first-byte times:
// 0.2 follows a change within about ten answers while one slow answer moves the average
// by a fifth of its excess only.
const ewmaWeight = 0.2

// devWeight is the weight of a new sample in the moving mean deviation of a peer's
// answer times, and devMult how many deviations past its mean an answer may come:
// TCP's retransmission timer (RFC 6298) uses the same 1/4 and 4, for the same need of
// a bound that a loaded host's scattered answers do not pass while a steady link's
// stays close to its mean.
const (
	devWeight = 0.25
	devMult   = 4
)

// answerTime is a peer's usual answer time and its usual deviation from it.
type answerTime struct{ mean, dev time.Duration }

// hedger keeps the usual answer time of each peer and the origin's usual first-byte
// and first-block times, and from them the budgets of a peer request. Safe for
// concurrent use.
//
// Two budgets, because an owner answers its headers before it has a byte (peerserve):
//   - threshold, for the first word of an answer (102 or the headers): a few times
//     the peer's usual answer time (or its mean plus four deviations, when its answers
//     scatter more than that), plus the origin's first byte, within the floor and the
//     ceiling. A peer that is down or stalled is given up on within it.
//   - bodyBudget, for each read of the body: the threshold plus the ceiling (or the
//     origin's usual time to deliver a block, if longer). An owner that does not hold
//     a block fetches it from its origin before its first byte; a budget below that
//     would send every block cold on its owner to the origin twice, once by the owner
//     and once by the reader that gave up on it. The owner is known alive by then: it
//     answered.
type hedger struct {
	mult        float64
	floor, ceil time.Duration
	mu          sync.Mutex
	peers       map[string]answerTime        // by address; guarded by mu
	origin      time.Duration                // first byte; 0 while unmeasured; guarded by mu
	originBlock time.Duration                // open to a block's bytes; 0 while unmeasured; guarded by mu
	sampled     struct{ origin, block bool } // guarded by mu
	heard       map[string]time.Time         // when each peer last sent anything, by address; guarded by mu
}

func newHedger(o Options) *hedger {
	return &hedger{mult: o.HedgeMult, floor: o.HedgeFloor, ceil: o.HedgeCeiling, peers: map[string]answerTime{},
		heard: map[string]time.Time{}}
}

// threshold is how long a request to addr may take to its first byte. A peer never
// measured gets the ceiling: nothing says it is usually faster. So does any peer while
// the origin's answer time is unknown: the hedge sends the run to the origin, and
// giving a live peer up for an origin that may answer after 200 ms (a far link) only
// reads the stripe twice and later (a node whose stripes all come from peers never
// opens an origin range of its own to measure).
func (h *hedger) threshold(addr string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	usual, ok := h.peers[addr]
	if !ok || !h.sampled.origin {
		return h.ceil
	}
	t := max(time.Duration(h.mult*float64(usual.mean)), usual.mean+devMult*usual.dev) + h.origin
	return min(max(t, h.floor), h.ceil)
}

func ewma(old, sample time.Duration, first bool) time.Duration {
	if first {
		return sample
	}
	return old + time.Duration(ewmaWeight*float64(sample-old))
}

// bodyBudget is how long each read of the body of an answer of addr may wait: the
// threshold plus the ceiling, or plus the origin's usual time to deliver a block if
// that is longer. The owner answered, so it is alive; it may fetch the range from its
// origin before its first byte and a block at a time after it, behind its own ranges
// in flight on a link it shares, which no estimate of this node's bounds. An owner
// wedged there is given up on after this budget, and its own fetch's timeout cuts an
// origin range that stalls.
func (h *hedger) bodyBudget(addr string) time.Duration {
	t := h.threshold(addr)
	h.mu.Lock()
	defer h.mu.Unlock()
	return t + max(h.ceil, h.originBlock)
}

// heardFrom records that addr sent something (headers or body bytes) just now.
func (h *hedger) heardFrom(addr string) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heard[addr] = now
}

// lastHeard is when addr last sent anything; zero if never.
func (h *hedger) lastHeard(addr string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heard[addr]
}

// peerAnswered records a peer's answer time (to its headers).
func (h *hedger) peerAnswered(addr string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heard[addr] = time.Now()
	old, ok := h.peers[addr]
	if !ok {
		h.peers[addr] = answerTime{mean: d, dev: d / 2} // RFC 6298's first deviation
		return
	}
	h.peers[addr] = answerTime{mean: ewma(old.mean, d, false),
		dev: old.dev + time.Duration(devWeight*float64((d-old.mean).Abs()-old.dev))}
}

// originAnswered records the origin's first-byte time.
func (h *hedger) originAnswered(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.origin = ewma(h.origin, d, !h.sampled.origin)
	h.sampled.origin = true
}

// metaAnswered records the answer time of a metadata request to the origin (a stat or
// a listing) while no range has measured the origin: a listing answers in about the
// first-byte time of a range, or later, so it errs on the side of waiting for a peer.
func (h *hedger) metaAnswered(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.sampled.origin {
		h.origin, h.sampled.origin = d, true
	}
}

// originBlockDelivered records the time from opening an origin range to its first
// block's bytes.
func (h *hedger) originBlockDelivered(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.originBlock = ewma(h.originBlock, d, !h.sampled.block)
	h.sampled.block = true
}

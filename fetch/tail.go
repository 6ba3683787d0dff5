package fetch

import (
	"time"

	"github.com/playhead/playhead/readahead/pace"
)

// The tail beside a head read: a handle's first read at the head of a file names the
// file's last blocks (readahead.Decision.Tail, decided by the policy), and when that read
// has to go to the origin anyway its File asks for the tail at the same moment, on a
// range of its own: a player opening an MP4 with its moov at the end, or a scanner
// probing both ends, then waits one round trip for both instead of one after the other.
//
// The tail's blocks are claimed like any others, so they are fetched once: a reader
// that reaches them while they are on the way waits for them, and a sequential reader
// that gets there later finds them cached (or pending) and skips them. Only the
// missing ones are asked for, as one bounded range (the same conditional range as every
// other, checked against the File's version); no run's state sees it, so it starts no
// read-ahead at the tail, is never truncated as a run's abandoned range, and does not
// make a run look busy (its owner's Run is tailRun).

// tailRun is the Owner.Run of a tail range: no read-ahead run of the policy (whose ids
// start at 1) and not the -1 of an empty decision.
const tailRun = -2

// wantsTail reports whether read r should fetch its decision's tail: the policy named
// one, and the read's first block is neither cached nor on its way. Only then does the
// read wait for the origin, and fetching the tail beside it saves its round trip; a
// head already at hand answers at once, and the reader reaches the tail as soon as a
// prefetch would. Call it before r's own blocks are claimed. Caller holds mu.
func (fl *File) wantsTail(r pace.Read) bool {
	return r.Policy && !r.Dec.Tail.Empty() && !fl.present(r.First)
}

// claimTail claims the missing blocks of r's tail, each run of them on a bounded range
// of its own (one, unless some block of the tail is cached already or the tail spans
// stretches of two tiers, runbounds.go). Caller holds mu.
func (fl *File) claimTail(owner Owner, r pace.Read, now time.Time) {
	first, end := r.Dec.Tail.Off/fl.bs, fl.blockUp(r.Dec.Tail.End)
	owner.Run = tailRun
	for b := first; b < end; {
		if fl.present(b) || fl.recentlyFailed(b, now) {
			b++
			continue
		}
		e := b + 1
		for e < end && !fl.present(e) && !fl.recentlyFailed(e, now) {
			e++
		}
		s := fl.startRangeStream(owner, b*fl.bs, min(e*fl.bs, fl.size), true)
		s.tail = true
		e = fl.blockUp(s.reqEnd) // the stretch may end sooner: the rest gets its own range
		for c := b; c < e; c++ {
			fl.pending[c] = &pending{owner: s, done: make(chan struct{})}
		}
		s.want = s.reqEnd
		s.wake()
		fl.f.stats.tailRanges.Add(1)
		b = e
	}
}

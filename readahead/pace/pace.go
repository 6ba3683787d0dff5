// Package pace decides, from time, how far ahead of a reader to fetch and over how many
// range connections: the lead (rate × round trips), the refill plan of one read, and the
// split of read-ahead into parallel ranges. The readahead package above it is blind to
// time; pace is where the clock, the measured round trip and the delivered bytes come
// in, as values. Like readahead it is pure: no goroutines, no locks, no clock of its
// own, no I/O. The fetcher reads the clock, keeps the state under its lock, calls these
// functions and carries out what they return; the tests replay testdata/ fixtures.
//
// Words: a run is a reader's sequential run, as readahead tracks it; a stream is short
// for a range stream, one range request of the fetcher read block by block.
//
// Traps:
//   - The state machines (Run, Splitter) are not safe for concurrent use: the fetcher
//     holds its file's lock across each call.
//   - Times must come from one monotonic clock; a Run or Splitter fed a time earlier
//     than one it has seen measures a negative interval.
package pace

import "time"

const (
	// leadRTTs: one round trip for the request, two of margin for the transfer, for the
	// rate rising and for the next range's request (with two, a 20 MB/s player still
	// froze for 15-25 ms at range boundaries on the far link; with three it did not).
	leadRTTs = 3
	// MaxLead bounds the lead, as the largest read-ahead window does, bytes. It also
	// bounds what split read-ahead keeps in flight (PartSize).
	MaxLead = 64 << 20
	// DefaultRTT is assumed until the first range has answered.
	DefaultRTT = 200 * time.Millisecond
)

// Lead returns how many bytes past its furthest point a run consuming bps bytes a second
// should have requested, for an origin answering in rtt: leadRTTs round trips of
// consumption, at most limit (and at most MaxLead).
func Lead(bps float64, rtt time.Duration, limit int64) int64 {
	l := int64(bps * rtt.Seconds() * leadRTTs)
	return min(max(l, 0), limit, MaxLead)
}

// NextRTT folds sample, how long a range took to answer, into the smoothed round trip
// old (zero when none was measured yet): a quarter weight, so one slow answer moves the
// lead a little and a changed link moves it within a few ranges.
func NextRTT(old, sample time.Duration) time.Duration {
	if old == 0 {
		return sample
	}
	return (3*old + sample) / 4
}

// PartSize is the size of one part of split read-ahead over n range streams: part, or
// less when n parts would hold more than limit (and MaxLead) between them (16 streams of
// the 64 MiB default: 4 MiB parts), but at least one block of bs bytes.
func PartSize(n int, part, bs, limit int64) int64 {
	limit = min(limit, MaxLead)
	return max(min(part, limit/int64(max(n, 1))/bs*bs), bs)
}

// NearPart is the smallest part of split read-ahead, bytes: the part a reader reaches
// first. See PartAt.
const NearPart = 1 << 20

// PartAt is the size of a part of split read-ahead that starts dist bytes past the
// reader: part, but no more than half of dist and no less than NearPart (whole blocks
// of bs). A reader consumes split read-ahead in order, so it waits for the nearest part
// to arrive whole, at one connection's speed: a 4 MiB part at 25 MB/s is 170 ms, in
// which the other fifteen streams deliver what the reader cannot use yet. Parts that
// grow with their distance from the reader (1, 1, 1.5, 2.25, ... MiB) let it move at
// the whole link's speed from the first megabyte; far parts keep the full size, so a
// long copy pays no more requests than before.
func PartAt(part, dist, bs int64) int64 {
	size := min(part, max(NearPart, dist/2))
	return max(size/bs*bs, bs)
}

// ReceiveWindow is how many bytes of a paced run's range may be ahead of its reader in the
// kernel, waiting unread in the socket or on their way (its connection's window, less
// what waits): holdRTTs round trips of the reader's rate bps, for rtt the path's round
// trip (PathRTT), not the smoothed answer time.
//
// Why: once the run's lead is fetched, the fetcher stops reading the range, but the
// kernel keeps taking its bytes into a receive buffer that a tuned machine grows to tens
// of megabytes, and a sender with a window that large sends as fast as the line lets it.
// On a line the kernel shares (several players on one link), a range seconds ahead of
// its player then takes as much of the line as one whose player waits, and the waiting
// one freezes. Bounded so, an ahead range gets what its reader takes, and the rest of
// the line goes to the ranges that need it. One round trip of the rate is what a paced
// range needs in flight to keep that rate, and the window bounds what the sender may send
// per round trip: at two round trips (and at least 1 MiB), or at the smoothed answer time,
// which counts the handshakes of new connections, eight 3 MB/s players ahead of their
// readers were let through at 3.5 to 5.7 MB/s each and kept a 30 MB/s line full, and
// the players that started late froze for seconds; at 1.1 round trips of the path they
// take 26 MB/s between them and the late ones catch up (docs/BENCHMARKS.md, session 28).
// The tenth is margin for the rate estimate; a round trip that grows past it (a queue
// building) slows the range under its reader, which then eats into its lead until the
// bound is lifted (HoldLead).
func ReceiveWindow(bps float64, rtt time.Duration) int64 {
	if bps <= 0 {
		return 0
	}
	return max(int64(holdRTTs*bps*rtt.Seconds()), 1) // 0 would lift the bound
}

// holdRTTs: see ReceiveWindow.
const holdRTTs = 1.1

// HoldLead is how far past its reader a paced run's range must be, bytes, before its
// receive window is bounded (ReceiveWindow): half a second of the reader's rate bps.
// A range under half of that again has the bound lifted.
//
// Why: a run whose range is bounded while it is still behind makes up its start at a
// tenth of its rate: an 8 MB/s player held at 1.1 round trips from its first known rate,
// about 1.5 s in, while its one connection was still ramping, froze 21 times after 5 s
// (as free: none after 2 s). Bounded only once half a second ahead, it froze as free,
// and the held ranges still left the line to those behind. The lift keeps a range that
// fell behind (its reader sped up, the round trip grew) from being held under its
// reader's pace until its lead is gone.
func HoldLead(bps float64) int64 {
	return int64(bps * holdAhead.Seconds())
}

// holdAhead: see HoldLead.
const holdAhead = 500 * time.Millisecond

// PathRTT is the path's round trip as the answers of ranges show it: the shortest answer
// time seen lately (within pathRTTWindow). Min is zero until the first answer.
//
// Why not the smoothed answer time (NextRTT): that one counts the handshakes of ranges
// that had to dial (two round trips, three with TLS) and the queueing of busy moments,
// which is right for how long a new range takes, and wrong for how many bytes a held
// range needs per round trip (ReceiveWindow): on a 203 ms path where half the ranges
// dialed it was 350 ms, and the window worked out from it did not bind. The shortest
// answer still counts the origin's own time to answer, so it errs a little long: a
// window a little wider, never narrower than the path needs.
type PathRTT struct {
	Min time.Duration
	At  time.Time // when Min was seen
	// Next is the shortest answer seen since Min (zero: none), and when: it takes Min's
	// place when Min's window ends, so that an answer that waited for a handshake, coming
	// just then, does not.
	Next   time.Duration
	NextAt time.Time
}

// pathRTTWindow is how long a shortest answer stands: a path that changed (a route, a
// queue that stays) shows its new round trip within it. As BBR keeps its min RTT.
const pathRTTWindow = 10 * time.Second

// Observe returns the estimate with sample, an answer at now, folded in: the sample
// replaces the minimum when shorter; once the minimum is older than pathRTTWindow, the
// shortest answer seen since it (this one included) replaces it.
func (p PathRTT) Observe(now time.Time, sample time.Duration) PathRTT {
	if sample <= 0 {
		return p
	}
	if p.Min == 0 || sample <= p.Min {
		return PathRTT{Min: sample, At: now}
	}
	if p.Next == 0 || sample <= p.Next {
		p.Next, p.NextAt = sample, now
	}
	if now.Sub(p.At) > pathRTTWindow {
		return PathRTT{Min: p.Next, At: p.NextAt}
	}
	return p
}

// KeepUp is the narrowest window a paced run's range is capped at, whatever waits unread
// ahead of its reader: one round trip of the reader's rate bps, what the sender needs in
// flight to send at that rate.
//
// Why: the first range of a run is read before its rate is known, and on a tuned machine
// the kernel takes tens of megabytes of it (19 to 24 MB in its first 2.3 s on a 200 ms,
// 30 MB/s link). Capped at a few segments until its reader had read that backlog, the
// sender idled for seconds and its congestion control learned the trickle the window
// let through (BBR's estimate fell from 16.8 to 0.3 MB/s); once the backlog was read it
// took about 3 s to pass the reader's 3 MB/s again, and the player froze 3 to 13 times
// at 8 to 12 s. Held at a round trip of the rate, the sender goes on at about the
// reader's pace (the round trip measured at an answer is the shortest it will be, so no
// faster), and the backlog is not added to.
func KeepUp(bps float64, rtt time.Duration) int64 {
	return int64(bps * rtt.Seconds())
}

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

// MinReceiveWindow is the least ReceiveWindow: four 256 KiB blocks, so a slow reader's
// connection still has a few blocks on their way while the fetcher takes one.
const MinReceiveWindow = 1 << 20

// ReceiveWindow is how many bytes of a paced run's range may be ahead of its reader in the
// kernel, waiting unread in the socket or on their way (its connection's window, less
// what waits): two round trips of the reader's rate bps, at least MinReceiveWindow.
//
// Why: once the run's lead is fetched, the fetcher stops reading the range, but the
// kernel keeps taking its bytes into a receive buffer that a tuned machine grows to tens
// of megabytes, and a sender with a window that large sends as fast as the line lets it.
// On a line the kernel shares (several players on one link), a range seconds ahead of
// its player then takes as much of the line as one whose player waits, and the waiting
// one freezes. Bounded so, an ahead range gets what its reader takes, and the rest of
// the line goes to the ranges that need it. One round trip of the rate is what a paced
// range needs in flight to keep that rate; the second is margin for the rate rising and
// the round trip growing.
func ReceiveWindow(bps float64, rtt time.Duration) int64 {
	return max(int64(2*bps*rtt.Seconds()), MinReceiveWindow)
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

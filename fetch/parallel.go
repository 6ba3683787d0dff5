package fetch

import "time"

// Parallel range streams. An object store caps each connection (tens of MB/s per GET), so
// a sequential reader there is only as fast as its connections are many; a long shared
// link gains nothing from splitting and pays a request per part. Neither is known in
// advance, so the split is measured: while a file's read-ahead is behind (claimed blocks
// waiting to arrive), the number of streams doubles, and the doubling is kept only if the
// file's delivery rate rose by splitGain over the next probe interval; otherwise it falls
// back and stays there for splitHold. In split mode the read-ahead is cut into bounded
// parts of PartSize, each its own range, nearest part first.

const (
	// splitProbe is how long a stream count runs before its rate is judged: long enough
	// for new ranges to pass their first round trip and reach speed on a 200 ms link.
	splitProbe = time.Second
	// splitGain is the rise in delivery rate that justifies more streams; below it the
	// link, not the connection, is the limit.
	splitGain = 1.3
	// splitHold is how long a failed doubling is not retried, so a shared link is probed
	// a few times a minute at most.
	splitHold = 30 * time.Second
	// behindBlocks: claimed blocks still in flight above which a file's read-ahead counts
	// as behind its window (more than 8 MiB of 256 KiB blocks).
	behindBlocks = 32
)

// splitter is the per-file controller of parallel streams. Guarded by File.mu.
type splitter struct {
	n           int       // streams allowed for read-ahead (1 = one open-ended stream)
	prevN       int       // n before the last change; 0 when n was not just raised
	prevRate    float64   // delivery rate, bytes/s, measured with prevN
	since       time.Time // start of the current measurement
	deliveredAt int64     // File.delivered at since
	holdUntil   time.Time // no doubling before this
	peak        int       // highest n tried
}

// update judges the current stream count and decides the next one. behind says whether
// claimed read-ahead is waiting to arrive; it costs a scan, so it is asked only when a
// probe interval ends. Caller holds File.mu.
func (sp *splitter) update(now time.Time, delivered int64, behind func() bool, maxN int) {
	if sp.n == 0 {
		sp.n = 1
	}
	if sp.since.IsZero() {
		sp.since, sp.deliveredAt = now, delivered
		return
	}
	elapsed := now.Sub(sp.since)
	if elapsed < splitProbe {
		return
	}
	if !behind() {
		// Only a read-ahead that is behind measures the streams, not the reader.
		sp.since, sp.deliveredAt, sp.prevN = now, delivered, 0
		return
	}
	rate := float64(delivered-sp.deliveredAt) / elapsed.Seconds()
	switch {
	case sp.prevN > 0 && rate < sp.prevRate*splitGain:
		sp.n, sp.prevN, sp.holdUntil = sp.prevN, 0, now.Add(splitHold)
	case sp.n < maxN && now.After(sp.holdUntil):
		sp.prevN, sp.prevRate = sp.n, rate
		sp.n = min(2*sp.n, maxN)
		sp.peak = max(sp.peak, sp.n)
	default:
		sp.prevN = 0
	}
	sp.since, sp.deliveredAt = now, delivered
}

// inFlight counts blocks claimed by streams and not yet delivered. Caller holds mu.
func (fl *File) inFlight() int {
	n := 0
	for _, p := range fl.pending {
		if p.owner != nil {
			n++
		}
	}
	return n
}

// activeStreams counts the streams with claimed blocks left. Caller holds mu.
func (fl *File) activeStreams() int {
	n := 0
	for _, s := range fl.streams {
		if !s.stopped && s.next < s.want {
			n++
		}
	}
	return n
}

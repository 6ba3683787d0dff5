package fetch

import "time"

// Observer receives the fetcher's events as they happen, for what cumulative Stats
// cannot give: latency distributions and series by tier. The metrics package implements
// it; a new series is added there, not on the read path.
//
// Methods are called concurrently, from readers and from range goroutines, while no
// lock of the fetcher is held; they must be safe for concurrent use and return at once
// (no I/O, no blocking), since every call sits on a read's or a range's critical path.
type Observer interface {
	// Read: a File.ReadView (and so a File.Read) returned n bytes d after it was
	// called, whether it failed or not: a read that timed out is a long read, not a
	// missing one. Reads of nothing (at or past the end, n <= 0) are not observed.
	Read(d time.Duration, n int)
	// BlockRead: a reader got one block from tier.
	BlockRead(tier Tier)
	// OriginAnswered: the origin answered a range request (the response headers,
	// which its first bytes follow) d after the request was sent. Requests the origin
	// failed or never answered are not observed: their cost shows in Read.
	OriginAnswered(d time.Duration)
}

// Tier is where a reader got a block from.
type Tier string

// The tiers a block is read from. Stats counts them as BlocksCached and BlocksWaited.
const (
	TierCache Tier = "cache" // the block cache
	TierFetch Tier = "fetch" // a fetch in flight, landed and not yet in the cache, or kept for its reader (keep.go)
)

// nopObserver is the Observer of a fetcher whose Options name none.
type nopObserver struct{}

func (nopObserver) Read(time.Duration, int)      {}
func (nopObserver) BlockRead(Tier)               {}
func (nopObserver) OriginAnswered(time.Duration) {}

// observeRead reports the read that began at t0 and returned *v; deferred at the start
// of ReadView, so that every return is observed once.
func (f *Fetcher) observeRead(t0 time.Time, v *View) {
	f.opts.Observer.Read(time.Since(t0), v.Len())
}

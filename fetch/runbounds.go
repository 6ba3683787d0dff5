package fetch

import "github.com/playhead/playhead/source"

// Run bounds: a source may serve a file in stretches from different tiers (the peer
// tier: each stripe of blocks from its owner, this node's own from the origin). A range
// stream delivers its blocks in order, so a range that spans two stretches makes the
// blocks of the second wait on the tier of the first. Every range a stream opens, and
// every block it is given, therefore lies within one stretch: the stream's limit, set
// when it starts from the source's RunBounds.
//
// With the peer tier that is what keeps two nodes from waiting on each other: a block a
// node owns waits only on a range to the origin, and a block it asked a peer for waits
// only on that peer, whose own ranges for the blocks it owns go to the origin. No wait
// runs from a node to a peer and back.

// RunBounds is implemented by sources that serve a file in stretches from different
// tiers. RunEnd returns the end of the stretch that starts at off (off < end) within
// [off, end) of path's version v: a byte offset in (off, end]. A stretch may end sooner
// than where the tier changes (a source may bound how far it looks), never later.
//
// RunEnd is called with File.mu held: it must answer from memory, without I/O or
// waiting on anything that calls into the fetcher. Ends should fall on block
// boundaries: the fetcher rounds an end inside a block down to the block's start, but
// never below the end of off's block, so a stretch shorter than a block is read with
// the block.
type RunBounds interface {
	RunEnd(path string, v source.Version, off, end int64) int64
}

// runLimit is where a range stream starting at off (block aligned) must end: the end of
// the stretch the source's RunBounds gives, in whole blocks but at least one, or the
// file's size when the source has none. Caller holds mu.
func (fl *File) runLimit(off int64) int64 {
	if fl.f.bounds == nil || off >= fl.size {
		return fl.size
	}
	e := fl.f.bounds.RunEnd(fl.path, fl.version, off, fl.size)
	if e >= fl.size {
		return fl.size
	}
	return min(max(e/fl.bs*fl.bs, off+fl.bs), fl.size)
}

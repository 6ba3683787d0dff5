package vfs_test

import (
	"testing"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/vfs"
)

// writeMode is how the engine writes blocks to the cache in a test: always through the
// page cache (--cache-direct-io off), or always with direct I/O (on). The default
// (auto) mixes both, by the origin's speed; crash and corruption tests run under each
// pure mode so neither write path goes untested.
type writeMode struct {
	name   string
	direct bool
}

var writeModes = []writeMode{{"buffered", false}, {"direct", true}}

// apply sets opts for the mode.
func (m writeMode) apply(o *vfs.Options) {
	if m.direct {
		o.Fetch.ForceDirectWrites = true
		return
	}
	o.Cache.BufferedIO = true
	o.Fetch.DirectWriteRate = -1
}

// check fails the test when the cache's counters show the mode did not take: a
// direct run whose blocks all went through the page cache tested nothing new.
func (m writeMode) check(t *testing.T, s cache.Stats) {
	t.Helper()
	if m.direct && s.DirectWrites == 0 {
		t.Fatalf("%s mode: no block was written with direct I/O (cache stats %+v)", m.name, s)
	}
	if !m.direct && s.DirectWrites != 0 {
		t.Fatalf("%s mode: %d blocks were written with direct I/O", m.name, s.DirectWrites)
	}
}

// forWriteModes runs test once per write mode, as subtests named after the mode.
func forWriteModes(t *testing.T, test func(*testing.T, writeMode)) {
	for _, m := range writeModes {
		t.Run(m.name, func(t *testing.T) { test(t, m) })
	}
}

package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/playhead/playhead/fetch"
	"github.com/playhead/playhead/vfs"
)

// pageState ties the kernel's page cache of one file to the version whose reads filled
// it. The kernel has one page cache per inode, shared by every handle; this is what lets
// an open decide, through vfs.PagesFor, whether those pages may serve the new handle.
type pageState struct {
	mu      sync.Mutex
	of      *vfs.File            // the File whose reads fill the pages; nil: none known
	handles map[*handle]struct{} // open on the file
}

// open registers h and returns the FOPEN flags that carry out the decision.
//
// It also pins the handles the kernel may serve from pages that another handle's reads
// filled (vfs.File.Pin): the daemon never sees those bytes, so such a handle may have
// returned bytes of its version without a read of its own, and must never follow a
// change to another version. A direct-I/O handle neither fills nor reads the pages.
func (p *pageState) open(h *handle) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	others, shared := false, false
	for o := range p.handles {
		others = others || !o.f.SameObject(h.f)
		shared = shared || !o.direct
	}
	if p.handles == nil {
		p.handles = map[*handle]struct{}{}
	}
	p.handles[h] = struct{}{}
	var flags uint32
	switch vfs.PagesFor(p.of, h.f, others) {
	case fetch.KeepPages:
		p.of = h.f
		flags = fuse.FOPEN_KEEP_CACHE
	case fetch.BypassPages:
		// The pages stay the other version's; this handle neither reads nor fills them.
		h.direct = true
		return fuse.FOPEN_DIRECT_IO
	default:
		// Without FOPEN_KEEP_CACHE the kernel drops the file's pages at this open; the
		// pages filled from now on are of h's version.
		p.of = h.f
	}
	if flags&fuse.FOPEN_KEEP_CACHE != 0 || shared {
		h.f.Pin()
	}
	for o := range p.handles {
		if o != h && !o.direct {
			o.f.Pin() // h's reads fill pages o may be served from
		}
	}
	return flags
}

// release forgets h.
func (p *pageState) release(h *handle) {
	p.mu.Lock()
	delete(p.handles, h)
	p.mu.Unlock()
}

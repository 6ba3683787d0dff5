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
func (p *pageState) open(h *handle) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	others := false
	for o := range p.handles {
		if !o.f.SameObject(h.f) {
			others = true
			break
		}
	}
	if p.handles == nil {
		p.handles = map[*handle]struct{}{}
	}
	p.handles[h] = struct{}{}
	switch vfs.PagesFor(p.of, h.f, others) {
	case fetch.KeepPages:
		p.of = h.f
		return fuse.FOPEN_KEEP_CACHE
	case fetch.BypassPages:
		// The pages stay the other version's; this handle neither reads nor fills them.
		return fuse.FOPEN_DIRECT_IO
	default:
		// Without FOPEN_KEEP_CACHE the kernel drops the file's pages at this open; the
		// pages filled from now on are h's version.
		p.of = h.f
		return 0
	}
}

// release forgets h.
func (p *pageState) release(h *handle) {
	p.mu.Lock()
	delete(p.handles, h)
	p.mu.Unlock()
}

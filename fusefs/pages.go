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

// open registers h and returns the FOPEN flags that carry out vfs.PagesFor's decision,
// pinning the handles it names. A direct-I/O handle neither fills nor reads the pages.
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
	d := vfs.PagesFor(p.of, h.f, others, shared)
	if d.PinOpened {
		h.f.Pin()
	}
	if d.PinOthers {
		for o := range p.handles {
			if o != h && !o.direct {
				o.f.Pin()
			}
		}
	}
	switch d.Pages {
	case fetch.KeepPages:
		p.of = h.f
		return fuse.FOPEN_KEEP_CACHE
	case fetch.BypassPages:
		h.direct = true // the pages stay the other version's
		return fuse.FOPEN_DIRECT_IO
	default:
		p.of = h.f // dropped at this open: the pages filled from now on are h's version
		return 0
	}
}

// release forgets h.
func (p *pageState) release(h *handle) {
	p.mu.Lock()
	delete(p.handles, h)
	p.mu.Unlock()
}

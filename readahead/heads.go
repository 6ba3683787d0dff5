package readahead

import "sync"

// Heads remembers how much of their files' heads recent header parsers read, by kind of
// file (the caller's key: the name's extension), so that the next file of that kind
// fetches its header in one round trip (Policy.SetHead). A library scan probes its files
// alike: ffprobe reads an MKV's first cluster, 571 kB of a 20 Mbit/s clip and more of a
// richer one, and a thumbnailer its first 64 KiB, file after file. What a parser reads
// is proof of what the next one will read, as consumption is proof for read-ahead.
//
// A kind's head is the largest of its last headMemory records, so one small file does
// not cost the next one its round trip, and one large probe is forgotten after a few
// files. It is safe for concurrent use: the handles of one mount share it.
type Heads struct {
	cfg   Config
	mu    sync.Mutex
	kinds map[string]*headRecords // at most maxHeadKinds
}

// headMemory is how many recent probes of a kind its head is taken from.
const headMemory = 4

// maxHeadKinds bounds the kinds remembered; past it the memory starts again, which costs
// each kind one open with SeekFetch. Media libraries hold a handful of kinds.
const maxHeadKinds = 256

type headRecords struct {
	last [headMemory]int64
	next int // where the next record goes, cycling
}

// NewHeads returns an empty memory for policies made with cfg.
func NewHeads(cfg Config) *Heads {
	return &Heads{cfg: cfg, kinds: map[string]*headRecords{}}
}

// Record notes that a header parser's run on a file of kind read to byte n
// (Policy.ProbedHead). A run that read on past four times HeadFetchMax is not a
// parser's header but a stream read from the head (FFmpeg playing a file opens it as a
// parser does and never jumps away): it tells nothing of the next file's header and is
// not recorded. Runs up to that are recorded at most at HeadFetchMax.
func (h *Heads) Record(kind string, n int64) {
	most := h.cfg.headFetchMax()
	if n <= 0 || n > 4*most {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.kinds[kind]
	if r == nil {
		if len(h.kinds) >= maxHeadKinds {
			clear(h.kinds)
		}
		r = &headRecords{}
		h.kinds[kind] = r
	}
	r.last[r.next] = min(n, most)
	r.next = (r.next + 1) % headMemory
}

// Head is the head to give a new handle on a file of kind (Policy.SetHead): the largest
// of the kind's recent records, 0 when none.
func (h *Heads) Head(kind string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	if r := h.kinds[kind]; r != nil {
		for _, v := range r.last {
			n = max(n, v)
		}
	}
	return n
}

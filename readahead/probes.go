package readahead

import "sync"

// Ends is how much of a file's two ends a header parser read: Head bytes from its
// start, Tail bytes back from its end; 0 when it read none.
type Ends struct{ Head, Tail int64 }

// Probes remembers how much of their files' two ends recent header parsers read, by
// kind of file (the caller's key: the name's extension), so that the next file of that
// kind fetches both with its first read, in one round trip (Policy.SetEnds). A library
// scan probes its files alike: ffprobe reads an MKV's first cluster, 571 kB of a
// 20 Mbit/s clip and more of a richer one, and an MP4's moov, which a file written
// without faststart holds at its end (2-4 MB for a feature film); a thumbnailer reads
// 64 KiB of each end, file after file. What a parser read is proof of what the next one
// will read, as consumption is proof for read-ahead.
//
// Each end of a kind is the largest of its last probeMemory records, so one small file
// does not cost the next one its round trip, and one large probe is forgotten after a
// few files. It is safe for concurrent use: the handles of one mount share it.
type Probes struct {
	cfg   Config
	mu    sync.Mutex
	kinds map[string]*probeRecords // at most maxProbeKinds
}

// probeMemory is how many recent probes of a kind each end is taken from.
const probeMemory = 4

// maxProbeKinds bounds the kinds remembered; past it the memory starts again, which
// costs each kind one open with the defaults. Media libraries hold a handful of kinds.
const maxProbeKinds = 256

type probeRecords struct{ head, tail endRecords }

type endRecords struct {
	last [probeMemory]int64
	next int // where the next record goes, cycling
}

func (r *endRecords) add(n int64) {
	r.last[r.next] = n
	r.next = (r.next + 1) % probeMemory
}

func (r *endRecords) most() int64 {
	var n int64
	for _, v := range r.last {
		n = max(n, v)
	}
	return n
}

// NewProbes returns an empty memory for policies made with cfg.
func NewProbes(cfg Config) *Probes {
	return &Probes{cfg: cfg, kinds: map[string]*probeRecords{}}
}

// Record notes what a header parser on a file of kind read of its ends
// (Policy.Probed). An end read further than four times its cap (Config.HeadFetchMax,
// TailMax) is not a parser's header or index but a stream (FFmpeg playing a file opens
// it as a parser does; a player that seeks near the end plays on to it): it tells
// nothing of the next file's and is not recorded. Ends up to that are recorded at most
// at their cap.
func (pr *Probes) Record(kind string, e Ends) {
	head, tail := pr.cfg.headFetchMax(), pr.cfg.tailMax()
	e.Head = keep(e.Head, head)
	e.Tail = keep(e.Tail, tail)
	if e == (Ends{}) {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r := pr.kinds[kind]
	if r == nil {
		if len(pr.kinds) >= maxProbeKinds {
			clear(pr.kinds)
		}
		r = &probeRecords{}
		pr.kinds[kind] = r
	}
	if e.Head > 0 {
		r.head.add(e.Head)
	}
	if e.Tail > 0 {
		r.tail.add(e.Tail)
	}
}

// keep is what Record keeps of an end of n bytes whose cap is most: n up to most, most
// up to four times it, nothing beyond.
func keep(n, most int64) int64 {
	if n <= 0 || n > 4*most {
		return 0
	}
	return min(n, most)
}

// Ends is what to give a new handle on a file of kind (Policy.SetEnds): each end the
// largest of the kind's recent records, 0 when none.
func (pr *Probes) Ends(kind string) Ends {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r := pr.kinds[kind]
	if r == nil {
		return Ends{}
	}
	return Ends{Head: r.head.most(), Tail: r.tail.most()}
}

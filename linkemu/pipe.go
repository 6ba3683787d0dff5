package linkemu

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Lock order: pipe.mu is never held while taking transmitter.mu (the reader books link
// time before it takes pipe.mu to queue the chunk).

const (
	// maxChunk bounds one read from the sender. A chunk is the unit of pacing and of
	// delivery: 64 KiB is 2 ms at 30 MB/s, fine-grained enough that pacing looks smooth
	// to a reader, coarse enough that a GB/s link costs a few thousand timer wake-ups a
	// second, not millions.
	maxChunk = 64 << 10

	// minChunk keeps slow links from waking a timer per packet.
	minChunk = 8 << 10

	// chunkTime is the serialization time chunks are sized to on slower links. A chunk is
	// delivered whole, so the first byte of a response waits for its chunk's last: 2 ms
	// keeps that error small next to any round trip worth emulating.
	chunkTime = 2 * time.Millisecond

	// windowSlack is added to the one-way bandwidth-delay product to size the in-flight
	// window, so a link that runs exactly at its rate never stalls on its own window; it is
	// also the most a saturated link queues, about 9 ms at 30 MB/s.
	windowSlack = 256 << 10

	// minWindow keeps slow or short links from a window so small that the proxy's own
	// bookkeeping, not the link model, limits throughput.
	minWindow = 1 << 20

	// unlimitedWindow is the in-flight cap of a link without a bandwidth cap: throughput
	// is then bounded by this window over the one-way delay, as a TCP window would.
	unlimitedWindow = 16 << 20

	// minShareWindow is the least window a connection keeps while it shares the link:
	// the slack plus a few chunks, so even many connections each keep moving.
	minShareWindow = windowSlack + 4*maxChunk
)

// transmitter is one serial pipe of a fixed rate: a chunk starts when the previous one has
// left and occupies it for size/rate. A link has one per direction, shared by its
// connections.
type transmitter struct {
	rate int64 // bytes/s; 0 = infinitely fast

	mu   sync.Mutex
	free time.Time // guarded by mu: when the last reserved chunk has left

	// sending counts the connections with bytes in flight in this direction: they share
	// the rate, and each one's window shrinks to its share (pipe.windowNow).
	sending atomic.Int64
}

// reserve books n bytes that are ready at ready and returns when they have left.
func (t *transmitter) reserve(ready time.Time, n int) time.Time {
	if t == nil || t.rate <= 0 {
		return ready
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	start := ready
	if t.free.After(start) {
		start = t.free
	}
	t.free = start.Add(txTime(n, t.rate))
	return t.free
}

// txTime is how long n bytes take at rate bytes/s.
func txTime(n int, rate int64) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

// book schedules n bytes that the reader got at ready and returns when they have left the
// sender's side of the link, or false if the pipe was torn down meanwhile.
//
// PerConnBandwidth is a pacer in front of the shared transmitter: a chunk passes it once
// this connection's previous chunks have (the reader waits for that, so TCP holds the
// sender meanwhile), and only then is queued on the shared transmitter. Queueing it at a
// future time instead would let one connection's bookings push every other connection's
// chunks behind them, since the shared transmitter is a FIFO, not a calendar. The pacer
// advances from its own schedule, not from when the reader woke, so timer lateness
// does not lower the rate.
func (p *pipe) book(ready time.Time, n int) (time.Time, bool) {
	start := ready
	if p.connRate > 0 {
		if p.connFree.After(start) {
			start = p.connFree
			if !p.sleepUntil(start) {
				return time.Time{}, false
			}
		}
		p.connFree = start.Add(txTime(n, p.connRate))
	}
	left := p.link.reserve(start, n)
	if p.connFree.After(left) {
		left = p.connFree
	}
	return left, true
}

// sleepUntil waits until t or until the pipe is torn down (false).
func (p *pipe) sleepUntil(t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-p.done:
		return false
	}
}

// chunk is data read from the sender and not yet delivered.
type chunk struct {
	buf     *[]byte // from chunkPool; data is (*buf)[:n]
	n       int
	deliver time.Time
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, maxChunk); return &b }}

// pipe carries one direction of one connection: a reader goroutine takes chunks from src
// and schedules them, a writer goroutine hands each to dst at its delivery time. The window
// (bytes read but not delivered) is bounded, so when dst stops reading, the writer blocks,
// the window fills, the reader stops reading and TCP flow control holds the sender.
type pipe struct {
	src, dst net.Conn
	delay    time.Duration
	link     *transmitter // the link's direction, shared by all connections
	connRate int64        // PerConnBandwidth; 0 = none
	connFree time.Time    // owned by readLoop: when this connection's last chunk passed its pacer
	window   int64
	chunk    int           // bytes per read from src, at most maxChunk
	counter  *atomic.Int64 // Stats bytes for this direction
	done     <-chan struct{}

	mu     sync.Mutex
	cond   sync.Cond // signals mu's fields changed; both goroutines wait on it
	queue  []chunk   // guarded by mu
	inAir  int64     // guarded by mu: bytes in queue plus the one being written
	srcEOF bool      // guarded by mu: reader finished; writer closes dst's write side after the queue
	broken bool      // guarded by mu: connection torn down; both goroutines return
}

func newPipe(src, dst net.Conn, o Options, link *transmitter, counter *atomic.Int64, done <-chan struct{}) *pipe {
	p := &pipe{
		src: src, dst: dst,
		delay: o.RTT / 2, link: link, connRate: o.PerConnBandwidth,
		window: windowFor(o), chunk: chunkFor(o),
		counter: counter, done: done,
	}
	p.cond.L = &p.mu
	return p
}

// windowFor sizes the in-flight window: the bytes one direction holds on the wire (rate ×
// RTT/2) plus slack, so the link can run at full rate, and no more, so a stalled receiver
// stalls the sender quickly. A real TCP window also covers the ACKs' way back (rate ×
// RTT), but here nothing waits for ACKs: a full-RTT window would park RTT/2 worth of
// bytes in the shared transmitter's queue and add RTT/2 of queueing delay to every other
// connection on the link, which a TCP running at its bandwidth-delay product does not.
func windowFor(o Options) int64 {
	rate := slowestRate(o)
	switch {
	case rate == 0 && o.Relay && o.RTT == 0:
		return minWindow // nothing to carry: only the pipeline between the two sockets
	case rate == 0:
		return unlimitedWindow
	}
	w := int64(float64(rate)*o.RTT.Seconds()/2) + windowSlack
	return max(w, minWindow)
}

// windowNow is the in-flight cap for this connection now. Alone on the link it is the
// full window. When several connections send at once, each one's window is what its
// share of the link's rate keeps on the wire over the one-way delay, plus slack: TCP
// flows sharing a bottleneck converge to their share of its bandwidth-delay product. A
// fixed full window per connection would instead queue (n-1) windows in the shared
// transmitter, a queueing delay that grows with every connection (eight players on a
// 30 MB/s link waited 0.8 s behind each other's windows), which no TCP link shows.
// Caller holds p.mu.
func (p *pipe) windowNow() int64 {
	if p.link == nil || p.link.rate <= 0 {
		return p.window
	}
	n := p.link.sending.Load()
	if p.inAir == 0 {
		n++ // about to send
	}
	if n <= 1 {
		return p.window
	}
	share := p.link.rate / n
	if p.connRate > 0 {
		share = min(share, p.connRate)
	}
	return min(max(int64(float64(share)*p.delay.Seconds())+windowSlack, minShareWindow), p.window)
}

// chunkFor sizes chunks to chunkTime of the slowest cap, within [minChunk, maxChunk].
func chunkFor(o Options) int {
	rate := slowestRate(o)
	if rate == 0 {
		return maxChunk
	}
	return int(min(max(int64(float64(rate)*chunkTime.Seconds()), minChunk), maxChunk))
}

// slowestRate is the tighter of the two caps, 0 if neither is set.
func slowestRate(o Options) int64 {
	rate := o.Bandwidth
	if o.PerConnBandwidth > 0 && (rate == 0 || o.PerConnBandwidth < rate) {
		rate = o.PerConnBandwidth
	}
	return rate
}

// stop tears the pipe down: both goroutines return without delivering the rest.
func (p *pipe) stop() {
	p.mu.Lock()
	p.broken = true
	for _, c := range p.queue {
		chunkPool.Put(c.buf)
	}
	p.queue = nil
	if p.inAir > 0 && p.link != nil {
		p.link.sending.Add(-1)
	}
	p.inAir = 0
	p.cond.Broadcast()
	p.mu.Unlock()
}

// readLoop reads src into chunks, books each on the transmitters and queues it.
func (p *pipe) readLoop() {
	defer func() {
		p.mu.Lock()
		p.srcEOF = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		for !p.broken && p.inAir+int64(p.chunk) > p.windowNow() {
			p.cond.Wait()
		}
		broken := p.broken
		p.mu.Unlock()
		if broken {
			return
		}

		buf := chunkPool.Get().(*[]byte)
		n, err := p.src.Read((*buf)[:p.chunk])
		if n > 0 {
			// The link's clock starts when the proxy sees the bytes: the loopback hop
			// from the sender is negligible next to any emulated delay.
			left, ok := p.book(time.Now(), n)
			if !ok {
				chunkPool.Put(buf)
				return
			}
			p.mu.Lock()
			if p.broken {
				p.mu.Unlock()
				chunkPool.Put(buf)
				return
			}
			p.queue = append(p.queue, chunk{buf: buf, n: n, deliver: left.Add(p.delay)})
			if p.inAir == 0 && p.link != nil {
				p.link.sending.Add(1)
			}
			p.inAir += int64(n)
			p.cond.Broadcast()
			p.mu.Unlock()
		} else {
			chunkPool.Put(buf)
		}
		if err != nil {
			// EOF or a reset: either way nothing more comes from src. What was read is
			// still delivered, then the writer half-closes dst, as TCP would.
			return
		}
	}
}

// writeLoop delivers queued chunks to dst at their delivery time. It returns false if dst
// failed or the pipe was torn down, true after src's EOF was passed on.
func (p *pipe) writeLoop() bool {
	for {
		p.mu.Lock()
		for !p.broken && len(p.queue) == 0 && !p.srcEOF {
			p.cond.Wait()
		}
		if p.broken {
			p.mu.Unlock()
			return false
		}
		if len(p.queue) == 0 { // srcEOF and drained
			p.mu.Unlock()
			if cw, ok := p.dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return true
		}
		c := p.queue[0]
		p.queue[0] = chunk{}
		p.queue = p.queue[1:]
		p.mu.Unlock()

		if !p.sleepUntil(c.deliver) {
			chunkPool.Put(c.buf)
			return false
		}
		// Counted before the write returns, so a receiver that has the bytes never
		// sees Stats without them.
		p.counter.Add(int64(c.n))
		_, err := p.dst.Write((*c.buf)[:c.n])
		chunkPool.Put(c.buf)
		if err != nil {
			return false
		}
		p.mu.Lock()
		p.inAir -= int64(c.n)
		if p.inAir == 0 && p.link != nil {
			p.link.sending.Add(-1)
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
}

package kernlink

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// queuePackets bounds a delay line, in packets. A direction holds its one-way
// bandwidth-delay product: 3 MB at 30 MB/s and 100 ms is 2,000 packets of 1500 bytes,
// and cloud-kernel's 250 MB/s and 20 ms is 560 packets of 9001. When the line is full
// the reader stops, the TUN's queue fills and the kernel drops, as a router would.
const queuePackets = 1 << 14

// packet is one IP packet on a delay line, due out at due.
type packet struct {
	data []byte
	due  time.Time
}

// delayLine is one direction of the link: packets read at t are written at t + delay, in
// the order read. Because the delay is the same for every packet, the queue is a FIFO
// whose head is always the next one due.
type delayLine struct {
	delay time.Duration
	mtu   int
	q     chan packet

	packets, bytes atomic.Int64 // written out
	dropped        atomic.Int64 // writes that failed (the packet is lost, as on a wire)
}

func newDelayLine(delay time.Duration, mtu int) *delayLine {
	return &delayLine{delay: delay, mtu: mtu, q: make(chan packet, queuePackets)}
}

// feed reads packets from src (one per Read, as a TUN gives them) onto the line until
// src fails; it then closes the line, so drain ends once the line is empty. Its error
// is src's, nil for io.EOF or a closed file.
func (d *delayLine) feed(src io.Reader) error {
	defer close(d.q)
	for {
		buf := make([]byte, d.mtu)
		n, err := src.Read(buf)
		if n > 0 {
			d.q <- packet{data: buf[:n], due: time.Now().Add(d.delay)}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
	}
}

// drain writes each packet to dst when it is due, until the line is closed and empty.
// A failed write drops the packet and goes on (TCP retransmits it). Once dst is closed
// the rest is discarded at once, but still taken off the line: feed may be blocked on a
// full line, and must reach its own closed source to end.
func (d *delayLine) drain(dst io.Writer) error {
	dstClosed := false
	for p := range d.q {
		if dstClosed {
			continue
		}
		if wait := time.Until(p.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(p.data); err != nil {
			dstClosed = errors.Is(err, os.ErrClosed)
			if !dstClosed {
				d.dropped.Add(1)
			}
			continue
		}
		d.packets.Add(1)
		d.bytes.Add(int64(len(p.data)))
	}
	return nil
}

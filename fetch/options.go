package fetch

import (
	"fmt"
	"time"

	"github.com/playhead/playhead/readahead/pace"
)

// Options tune the fetch scheduler. Zero values take the defaults of DefaultOptions.
type Options struct {
	// OnChange, when set, is called with the path of an object found changed at the
	// origin, once per File that served the old version, before its cached blocks are
	// dropped and with no lock held. It must not block: vfs drops its listing of the
	// file there and hands the kernel's invalidation to a goroutine.
	OnChange func(path string)

	// Observer, when set, receives every read, block served and origin answer as it
	// happens (observe.go). nil: nobody listens.
	Observer Observer

	// BlockSize is the fetch and cache granularity in bytes. It must equal the block cache's
	// block size. Default 256 KiB: small enough that a scanner's 64 KiB probe costs little,
	// large enough that per-block overhead (a cache file, a wake-up) stays invisible.
	BlockSize int64

	// ReadThrough is how many bytes a range stream may read and throw away (or land in the
	// cache) to reach a block a reader wants, rather than opening a new range. Opening a
	// range costs one round trip; on a 200 ms, 30 MB/s link that is 6 MB of transfer, so
	// skipping up to a few MB forward through an open connection is cheaper. Default 4 MiB.
	ReadThrough int64

	// IOTimeout bounds how long a read waits while the origin makes no progress (refused
	// connections, errors, a stalled body). After it, the read fails (EIO at the FUSE edge)
	// instead of hanging. Default 30 s.
	IOTimeout time.Duration

	// StallTimeout: a body that delivers no byte for this long is abandoned and the range
	// reopened, since a silently dead connection would otherwise hold readers until
	// IOTimeout. Default 10 s.
	StallTimeout time.Duration

	// IdleClose: a read-ahead stream that nobody wants more bytes from keeps its
	// connection open this long, so a reader that skips a little forward or resumes can read
	// through it without a new round trip. Default 3 s.
	IdleClose time.Duration

	// MaxRangeStreams caps the range streams open at once for one file. Default 16, so
	// that MaxParallel can be 16.
	MaxRangeStreams int

	// OpenEndedWindow is the read-ahead window from which a sequential stream is one
	// open-ended range; smaller windows are fetched as bounded ranges of the window's size.
	// An open-ended range abandoned after a seek wastes whatever the network path buffers
	// (on a 200 ms, 30 MB/s link about 6 MB); a reader that consumed enough to grow its
	// window this far is unlikely to leave, and wastes little relative to what it read.
	// A reader that has not left a run of the file yet is opened sooner, at
	// pace.OpenAtOnce (see there). Default 16 MiB.
	OpenEndedWindow int64

	// MaxParallel caps the range streams one file's read-ahead is split into when
	// splitting measurably raises throughput (object stores cap each connection; see
	// readahead/pace/split.go). 1 disables splitting. Default 16: at 25 MB/s per
	// connection, 16 streams reach what 16 parallel range requests reach on the cloud
	// link (about 250 MB/s here, the machine's limit); 8 reached half of it.
	MaxParallel int

	// MaxLead bounds, in bytes, how far past a sequential reader's furthest point its
	// read-ahead may reach, whatever its rate earns (the lead, readahead/pace) and however
	// many parts split read-ahead keeps in flight: the mount sets it to --read-ahead
	// (readahead.Config.MaxWindow), so that flag bounds what a reader has requested ahead
	// of it. Zero: no bound but pace.MaxLead (64 MiB). Default 0.
	MaxLead int64

	// PartSize is the size of one range when read-ahead is split, bytes. Default 8 MiB:
	// at 25 MB/s per connection a part takes about 0.3 s, so a 40 ms request costs ~10%.
	PartSize int64

	// RetryMin and RetryMax bound the exponential backoff between attempts after a
	// transient origin error. Defaults 50 ms and 2 s.
	RetryMin, RetryMax time.Duration

	// DirectWriteRate is the delivery rate, bytes per second, from which a stream's blocks
	// go to the cache with direct I/O while the cache writers are behind (writer.go);
	// negative: never. Default 200 MB/s:
	// several times the far (30 MB/s) and per-connection cloud (25 MB/s) links and any
	// video bitrate, well below the 800 MB/s to 1 GB/s a loopback or same-rack origin
	// delivers.
	DirectWriteRate float64

	// KeepBytes bounds the memory of read-ahead blocks that landed in the cache before
	// their reader came and are kept for it (keep.go), for the whole Fetcher. Negative:
	// none are kept. Default: MaxLead up to pace.MaxLead (64 MiB), one fast reader's
	// lead: a larger --read-ahead asks for more disk, not more memory.
	KeepBytes int64

	// ForceDirectWrites sends every block to the cache with direct I/O, whatever the
	// stream's rate and the write queue's length (--cache-direct-io on, and the crash
	// and corruption tests of the direct write path). The cache still writes a block
	// through the page cache where the file system or the buffer's alignment does not
	// allow direct I/O. It overrides a negative DirectWriteRate.
	ForceDirectWrites bool
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{
		BlockSize:       256 << 10,
		ReadThrough:     4 << 20,
		IOTimeout:       30 * time.Second,
		StallTimeout:    10 * time.Second,
		IdleClose:       3 * time.Second,
		MaxRangeStreams: 16,
		MaxParallel:     16,
		OpenEndedWindow: 16 << 20,
		PartSize:        8 << 20,
		RetryMin:        50 * time.Millisecond,
		RetryMax:        2 * time.Second,
		DirectWriteRate: 200e6,
	}
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.BlockSize == 0 {
		o.BlockSize = d.BlockSize
	}
	if o.ReadThrough == 0 {
		o.ReadThrough = d.ReadThrough
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = d.IOTimeout
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = d.StallTimeout
	}
	if o.IdleClose == 0 {
		o.IdleClose = d.IdleClose
	}
	if o.MaxRangeStreams == 0 {
		o.MaxRangeStreams = d.MaxRangeStreams
	}
	if o.MaxParallel == 0 {
		o.MaxParallel = d.MaxParallel
	}
	if o.OpenEndedWindow == 0 {
		o.OpenEndedWindow = d.OpenEndedWindow
	}
	if o.PartSize == 0 {
		o.PartSize = d.PartSize
	}
	if o.RetryMin == 0 {
		o.RetryMin = d.RetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = d.RetryMax
	}
	if o.DirectWriteRate == 0 {
		o.DirectWriteRate = d.DirectWriteRate
	}
	if o.KeepBytes == 0 {
		o.KeepBytes = pace.MaxLead
		if o.MaxLead > 0 {
			o.KeepBytes = min(o.MaxLead, pace.MaxLead)
		}
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.BlockSize < 4096:
		return fmt.Errorf("fetch: block size %d is below 4 KiB", o.BlockSize)
	case o.ReadThrough < 0:
		return fmt.Errorf("fetch: negative read-through distance %d", o.ReadThrough)
	case o.IOTimeout < 0 || o.StallTimeout < 0 || o.IdleClose < 0:
		return fmt.Errorf("fetch: negative timeout")
	case o.MaxRangeStreams < 1:
		return fmt.Errorf("fetch: max range streams %d must be at least 1", o.MaxRangeStreams)
	case o.MaxParallel < 1 || o.MaxParallel > o.MaxRangeStreams:
		return fmt.Errorf("fetch: max parallel %d must be between 1 and max range streams %d", o.MaxParallel, o.MaxRangeStreams)
	case o.MaxLead < 0:
		return fmt.Errorf("fetch: negative max lead %d", o.MaxLead)
	case o.PartSize < o.BlockSize:
		return fmt.Errorf("fetch: part size %d below the block size %d", o.PartSize, o.BlockSize)
	case o.RetryMin > o.RetryMax:
		return fmt.Errorf("fetch: retry backoff min %v above max %v", o.RetryMin, o.RetryMax)
	}
	return nil
}

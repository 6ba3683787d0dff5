package readahead

import "fmt"

// minBlockSize is one kernel page: the block cache cannot usefully track less, and a
// smaller block only multiplies per-block overhead in the fetcher.
const minBlockSize = 4 << 10

// Config tunes a Policy. Fields are taken literally: unlike fetch.Options, a zero field
// does not mean "use the default", because zero is a meaningful setting for several of
// them (MaxWindow 0 disables read-ahead, Trigger 0 engages it on the first read). Start
// from DefaultConfig and change what you need.
type Config struct {
	// BlockSize is the fetch granularity in bytes; it must equal the block cache's block
	// size. Every range in a Decision is aligned to it: start rounded down, end rounded up,
	// then clipped to the file size. Default 256 KiB. Zero is invalid; at least 4 KiB.
	BlockSize int64

	// SeekFetch is the minimum demand fetch in bytes for a read that starts a new run
	// (the first read of a file, or a seek away from every run): the read is extended
	// to at least SeekFetch bytes from its first block, so playback right after a seek has
	// data while read-ahead is still spinning up. It must stay small: a media scanner
	// probing 64 KiB at the start and at the end of a file then costs about 0.8 MB
	// (512 KiB at the start, a block or two at the end). A player's first 256 KiB read
	// reaches Trigger, and its window starts where this ends, so a player asks for the
	// same 5.25 MiB whatever SeekFetch is. Default 512 KiB. Zero fetches just the blocks
	// the read touches. A handle's first read at the head may fetch more, up to
	// HeadFetchMax, when header parsers of files of its kind were seen to read more
	// (Probes).
	SeekFetch int64

	// HeadFetchMax caps the head a file's first read fetches from what header parsers of
	// earlier files of its kind read (Probes, Policy.SetEnds): ffprobe and FFmpeg read an
	// MKV's first cluster in order, 571 kB of the bench's 20 Mbit/s clip, past SeekFetch,
	// so with SeekFetch alone every such open waits a second round trip for the rest of
	// its header and sends a ProbeWindow of which it reads a tenth. Files of a library
	// are probed alike, so the next one gets its header in one round trip, while a kind
	// whose probes read less (a thumbnailer's 64 KiB, ffprobe's 160 kB of an MP4 whose
	// moov is at its end) keeps SeekFetch. Default 1 MiB: with the default tail, a probe
	// costs at most 1.25 MiB. At most SeekFetch disables it, as MaxWindow 0 does.
	HeadFetchMax int64

	// Trigger is how many bytes one run must consume sequentially before read-ahead
	// engages. A thumbnailer reading 64 to 128 KiB at the start and end of a file never
	// reaches it, so it costs no read-ahead at all (the kernel turns a 64 KiB probe into one
	// 128 KiB read). Default 256 KiB, which a player reading 256 KiB chunks reaches with
	// its first read.
	// Zero engages read-ahead on the first read of every run, except a header parser's
	// (ProbeWindow), which waits for a read past the head its first read fetched.
	Trigger int64

	// InitialWindow is the read-ahead window in bytes once Trigger is reached; the window
	// then doubles each time the run consumes GrowEvery current windows (see
	// run.go). Default 5 MiB, sized for the first read of a fast player: a player's
	// 256 KiB first read reaches Trigger at once, and until its data arrives nothing tells
	// a 20 MB/s player from a 3 MB/s one, so SeekFetch plus this window (5.25 MiB) is what
	// must be on its way to carry 20 MB/s through the next request's round trip on a
	// 200 ms link. A reader that seeks away after 2 MB leaves under 3 times what it
	// played; the fetcher keeps slow readers from asking for more (readahead/pace). Must be
	// in [BlockSize, MaxWindow] unless MaxWindow is 0, when it is ignored: a window
	// smaller than a block could fall entirely inside the block the reader is already in,
	// and read-ahead would engage yet fetch nothing.
	InitialWindow int64

	// ProbeWindow replaces InitialWindow for a run that begins in the file's first
	// block with a read shorter than 128 KiB (see probeRead): a demuxer or scanner
	// parsing a header (FFmpeg reads 32 KiB, which the kernel sends as 64 KiB, then 128
	// and 256 KiB), not a reader that asks for a player's or a copy's chunk at once, nor
	// a seek to play from. Such a run has proven only what it read, so
	// its first window is small, it engages only once a read passes the head its first
	// read fetched (SeekFetch; see probeRead), and the fetcher's lead grows with what it
	// consumes (readahead/pace: at most twice the consumption past the window). Default
	// 2 MiB: a scanner reading past its first 0.5 MiB has its second megabyte on the way
	// in the same round trip, and ffprobe, which reads an MP4's two ends, none of it.
	// Bytes; used up to InitialWindow. Zero gives every run InitialWindow (a parser's
	// run still waits for its read past the head).
	ProbeWindow int64

	// MaxWindow caps the read-ahead window in bytes (the --read-ahead flag). Default
	// 64 MiB: about two seconds of a saturated 30 MB/s link, enough to ride out a stall
	// of several 200 ms round trips. Zero disables read-ahead entirely: decisions carry
	// only the demand fetch, still extended to SeekFetch after a seek.
	MaxWindow int64

	// GrowEvery is how many current windows a run must consume before its window
	// doubles. Default 2: the window reaches 64 MiB after about 150 MiB of sustained
	// reading, while a player that seeks every few megabytes keeps its first window.
	// Must be at least 1 when read-ahead is on.
	GrowEvery int64

	// Slack is how far behind a run's furthest point, or ahead of it, a read may land
	// and still belong to that run, in bytes. Kernel FUSE async reads are issued from
	// several threads and arrive out of order (8.0, 8.5, 8.25, 9.0 MB); a reader may
	// also skip a little forward. Default 4 MiB. Zero accepts only reads that start
	// exactly at the furthest point.
	Slack int64

	// MaxRuns is how many runs one Policy tracks; when a new run is needed and
	// all are in use, the least recently used is dropped. It should be at least the number
	// of readers expected on one file at once, or they evict each other's windows.
	// Default 8. Zero is invalid.
	MaxRuns int

	// Tail is how many bytes at the end of the file a handle's first read asks for
	// alongside itself when it starts in the file's first block and engages no
	// read-ahead (Decision.Tail): demuxers and scanners read both ends of a media file
	// before anything else, and fetched together the two cost one round trip instead of
	// two. The range is whole blocks covering the last Tail bytes: one block, or two
	// when the last one is short.
	//
	// Default 256 KiB, from what the two ends hold:
	//   - a scanner's probe at the end (the bench's thumbs reads 64 KiB, ThumbProbe;
	//     mediainfo and ffprobe read tens of KiB there), which the kernel widens to whole
	//     pages up to EOF: at least 64 KiB, whatever the length of the last block;
	//   - MKV's Cues and Tags, which mkvmerge writes after the clusters: a CuePoint per
	//     video keyframe, about 20 bytes each, so a two-hour film with a keyframe every
	//     2 s has about 70 KiB of Cues;
	//   - MP4's moov when written last (phones, cameras, ffmpeg without faststart): a
	//     demuxer jumps to its start from the mdat header. Its sample tables take about
	//     550 bytes per second of H.264 and AAC (4-byte sizes and 8-byte composition
	//     offsets for 24-30 frames, 4-byte sizes for 47 AAC frames), so 256 KiB holds the
	//     moov of about 8 minutes of video: clips and phone videos, not feature films,
	//     whose moov of 2-4 MB no small tail covers (its first read then costs its own
	//     round trip, and its window another, until TailMax learns it).
	// Larger would cover longer MP4s at the cost of every head-only open (a player of a
	// faststart MP4 or an MKV with its Cues in front, a `file` probe) wasting it; 1 MiB
	// would hold half an hour of moov but put a scanner's per-file cost at 1.5 MiB with
	// SeekFetch. Zero disables it. It is not read-ahead: MaxWindow 0 leaves it on. A
	// handle's first read may fetch more, up to TailMax, when header parsers of files of
	// its kind were seen to read more of the end (Probes).
	Tail int64

	// TailMax caps the tail a handle's first read at the head fetches from what header
	// parsers of earlier files of its kind read at the end (Probes, Policy.SetEnds): the
	// moov of a feature film written without faststart, which Tail misses, so that each
	// probe of such a file waited two more round trips (the moov's first blocks, then
	// the window of its run). Two hours of H.264 and AAC take 2-4 MB of moov in
	// one-second chunks, and 6.2 MB when each frame is its own chunk (the bench's
	// films). Default 8 MiB. At most Tail disables it, as Tail 0 and MaxWindow 0 do.
	TailMax int64
}

// DefaultConfig returns the defaults described on Config.
func DefaultConfig() Config {
	return Config{
		BlockSize:     256 << 10,
		SeekFetch:     512 << 10,
		HeadFetchMax:  1 << 20,
		Trigger:       256 << 10,
		InitialWindow: 5 << 20,
		ProbeWindow:   2 << 20,
		GrowEvery:     2,
		MaxWindow:     64 << 20,
		Slack:         4 << 20,
		MaxRuns:       8,
		Tail:          256 << 10,
		TailMax:       8 << 20,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.BlockSize < minBlockSize:
		return fmt.Errorf("readahead: block size %d is below %d bytes", c.BlockSize, minBlockSize)
	case c.SeekFetch < 0:
		return fmt.Errorf("readahead: negative seek fetch %d", c.SeekFetch)
	case c.HeadFetchMax < 0:
		return fmt.Errorf("readahead: negative head fetch max %d", c.HeadFetchMax)
	case c.Trigger < 0:
		return fmt.Errorf("readahead: negative trigger %d", c.Trigger)
	case c.MaxWindow < 0:
		return fmt.Errorf("readahead: negative max window %d", c.MaxWindow)
	case c.MaxWindow > 0 && (c.InitialWindow < c.BlockSize || c.InitialWindow > c.MaxWindow):
		return fmt.Errorf("readahead: initial window %d outside [block size %d, max window %d]",
			c.InitialWindow, c.BlockSize, c.MaxWindow)
	case c.ProbeWindow < 0 || (c.MaxWindow > 0 && c.ProbeWindow > 0 && c.ProbeWindow < c.BlockSize):
		return fmt.Errorf("readahead: probe window %d below block size %d", c.ProbeWindow, c.BlockSize)
	case c.GrowEvery < 0:
		return fmt.Errorf("readahead: negative grow-every %d", c.GrowEvery)
	case c.Slack < 0:
		return fmt.Errorf("readahead: negative slack %d", c.Slack)
	case c.MaxRuns < 1:
		return fmt.Errorf("readahead: max runs %d must be at least 1", c.MaxRuns)
	case c.Tail < 0:
		return fmt.Errorf("readahead: negative tail %d", c.Tail)
	case c.TailMax < 0:
		return fmt.Errorf("readahead: negative tail max %d", c.TailMax)
	}
	return nil
}

// headFetch is where the demand fetch of a run's first read in the file's first block
// ends at the least: SeekFetch, in whole blocks.
func (c *Config) headFetch() int64 { return c.blocksUp(c.SeekFetch) }

// headFetchMax is the largest head Policy.SetEnds gives: HeadFetchMax in whole blocks,
// never less than headFetch; headFetch when read-ahead is off (MaxWindow 0), which
// fetches only what reads touch and SeekFetch.
func (c *Config) headFetchMax() int64 {
	if c.MaxWindow == 0 {
		return c.headFetch()
	}
	return max(c.headFetch(), c.blocksUp(c.HeadFetchMax))
}

// tailMax is the largest tail Policy.SetEnds gives: TailMax, never less than Tail; Tail
// when read-ahead is off (MaxWindow 0) or the tail is (Tail 0).
func (c *Config) tailMax() int64 {
	if c.MaxWindow == 0 || c.Tail == 0 {
		return c.Tail
	}
	return max(c.Tail, c.TailMax)
}

// blocksUp rounds n up to whole blocks.
func (c *Config) blocksUp(n int64) int64 { return (n + c.BlockSize - 1) / c.BlockSize * c.BlockSize }

// growEvery is GrowEvery with zero read as one.
func (c *Config) growEvery() int64 { return max(c.GrowEvery, 1) }

package scenario

import "slices"

// Figures are one trial's measurements by key (see the Fig* constants). Values are in the
// unit their Def names: seconds, bytes, bytes per second, counts or ratios. A missing key
// means "not measured by this scenario", which reports print as "-".
type Figures map[string]float64

// Figure keys. The first group is measured by scenarios, the second filled in by the
// runner (origin counters and daemon samples), the third derived from both by Derive.
const (
	FigStartup     = "startup_s"      // first read's latency (per scenario: see its doc)
	FigFreezes     = "freezes"        // reads completing more than 10 ms after due
	FigFrozenTotal = "frozen_total_s" // sum of the freezes' lateness
	FigWorstStall  = "worst_stall_s"  // the latest read
	FigReadP99     = "read_p99_s"     // 99th percentile read latency (nearest rank)
	FigThroughput  = "throughput_Bps" // bytes read / wall time of the reading
	FigBytesRead   = "bytes_read"     // bytes the scenario read (and verified)
	FigFiles       = "files"          // files the scenario touched (thumbs)

	FigOriginBytes    = "origin_bytes"    // response body bytes the origin sent
	FigOriginRequests = "origin_requests" // HTTP requests the origin answered
	FigNewConns       = "new_conns"       // TCP connections the origin accepted
	FigPeakRSS        = "peak_rss_bytes"  // daemon's VmHWM just before it was stopped
	FigCPU            = "cpu_s"           // daemon's user+system CPU just before it was stopped
	// FigLinkBytesDown is what the link carried from the origin to the system, headers
	// included: the link's own count, beside the origin's (s3 origin only).
	FigLinkBytesDown = "link_bytes_down"
	// FigOriginWireBytes is what the origin's end of a kernel-shaped link transmitted,
	// IP and TCP headers and retransmissions included: the kernel's count, server side.
	FigOriginWireBytes = "origin_wire_bytes"

	FigWaste              = "waste"                 // origin bytes / bytes read
	FigOriginBytesPerFile = "origin_bytes_per_file" // origin bytes / files

	// Scenario-specific figures.
	FigSeekTTFMedian     = "seek_ttf256k_median_s" // seek: median time to the first 256 KiB
	FigSeekTTFMax        = "seek_ttf256k_max_s"    // seek: worst time to the first 256 KiB
	FigFileMedian        = "file_median_s"         // thumbs: median time per file
	FigFileMax           = "file_max_s"            // thumbs: worst time per file
	FigCachedThroughput  = "cached_throughput_Bps" // bulk: the second, cached read
	FigStreamStartupMax  = "stream_startup_max_s"  // streams: the slowest stream's startup
	FigFirstPlayOrigin   = "first_play_origin_bytes"
	FigShuffledPieceLate = "piece_late_max_s" // shuffled: the latest piece (negative: all early)

	// players: ffmpeg's first frame at 0 is FigStartup; then again at 30 s and 45 s on
	// the same mount. Origin bytes per run are the counters' growth over the run.
	FigFrameAt30       = "first_frame_ss30_s"
	FigFrameAt45       = "first_frame_ss45_s"
	FigFirstFrameBytes = "origin_bytes_ss0"
	FigAt30Bytes       = "origin_bytes_ss30"
	FigAt45Bytes       = "origin_bytes_ss45"
	FigFirstFrameRead  = "player_read_ss0" // bytes ffmpeg read in that run (rchar, less its start-up)
	FigAt30Read        = "player_read_ss30"
	FigAt45Read        = "player_read_ss45"
	FigProbeMedian     = "probe_median_s" // players: ffprobe per file of the scan, median
	FigProbeMax        = "probe_max_s"
	FigScan            = "scan_s" // players: the whole scan, listing included
)

// Unit says how a figure is printed.
type Unit int

// Units of figures.
const (
	Seconds Unit = iota
	Count
	Bytes
	Rate // bytes per second
	Ratio
)

// Better says which way a figure improves, for marking the better system in a
// comparison.
type Better int

// Directions of Better.
const (
	Neither Better = iota // not a quality (bytes read: every system reads the same)
	Lower
	Higher
)

// Def describes a figure for reports.
type Def struct {
	Key    string
	Label  string // column header or row label
	Unit   Unit
	Better Better
}

// PlaybackDefs are the columns of the report's playback table, in order.
var PlaybackDefs = []Def{
	{FigStartup, "startup", Seconds, Lower},
	{FigFreezes, "freezes", Count, Lower},
	{FigFrozenTotal, "frozen", Seconds, Lower},
	{FigWorstStall, "worst stall", Seconds, Lower},
	{FigReadP99, "p99 read", Seconds, Lower},
	{FigThroughput, "throughput", Rate, Higher},
}

// CostDefs are the columns of the report's cost table, in order.
var CostDefs = []Def{
	{FigBytesRead, "read", Bytes, Neither},
	{FigOriginBytes, "origin", Bytes, Lower},
	{FigWaste, "waste", Ratio, Lower},
	{FigOriginRequests, "requests", Count, Lower},
	{FigNewConns, "new conns", Count, Lower},
	{FigPeakRSS, "peak RSS", Bytes, Lower},
	{FigCPU, "CPU", Seconds, Lower},
}

// ExtraDefs are scenario-specific figures, printed as rows under the tables when a case
// has them.
var ExtraDefs = []Def{
	{FigSeekTTFMedian, "time to first 256 KiB after a seek, median", Seconds, Lower},
	{FigSeekTTFMax, "time to first 256 KiB after a seek, max", Seconds, Lower},
	{FigFileMedian, "time per file (stat, 64 KiB at start and end, close), median", Seconds, Lower},
	{FigFileMax, "time per file, max", Seconds, Lower},
	{FigOriginBytesPerFile, "origin bytes per file", Bytes, Lower},
	{FigCachedThroughput, "second read (cached, caches not dropped)", Rate, Higher},
	{FigStreamStartupMax, "slowest stream's startup", Seconds, Lower},
	{FigFirstPlayOrigin, "origin bytes of the first play (cold)", Bytes, Lower},
	{FigLinkBytesDown, "bytes down the link, headers included (the link's count)", Bytes, Lower},
	{FigOriginWireBytes, "bytes the origin's end of the kernel-shaped link sent, headers and retransmissions included", Bytes, Lower},
	{FigShuffledPieceLate, "latest piece relative to its due time", Seconds, Lower},
	{FigFirstFrameBytes, "origin bytes of ffmpeg's first frame (cold)", Bytes, Lower},
	{FigFirstFrameRead, "ffmpeg's first frame: bytes it read", Bytes, Neither},
	{FigFrameAt30, "ffmpeg -ss 30 then: time to first frame", Seconds, Lower},
	{FigAt30Bytes, "ffmpeg -ss 30: origin bytes", Bytes, Lower},
	{FigAt30Read, "ffmpeg -ss 30: bytes it read", Bytes, Neither},
	{FigFrameAt45, "ffmpeg -ss 45 then: time to first frame", Seconds, Lower},
	{FigAt45Bytes, "ffmpeg -ss 45: origin bytes", Bytes, Lower},
	{FigAt45Read, "ffmpeg -ss 45: bytes it read", Bytes, Neither},
	{FigProbeMedian, "ffprobe per file, median", Seconds, Lower},
	{FigProbeMax, "ffprobe per file, max", Seconds, Lower},
	{FigScan, "whole library scan (listing and every ffprobe)", Seconds, Lower},
}

// Derive fills the figures computed from a scenario's and the runner's figures: waste
// and origin bytes per file. It is idempotent.
func Derive(f Figures) {
	if ob, ok := f[FigOriginBytes]; ok {
		if br := f[FigBytesRead]; br > 0 {
			f[FigWaste] = ob / br
		}
		if n := f[FigFiles]; n > 0 {
			f[FigOriginBytesPerFile] = ob / n
		}
	}
}

// Keys returns the keys of f, sorted, for stable output.
func (f Figures) Keys() []string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package pace

import (
	"time"

	"github.com/playhead/playhead/readahead"
)

const (
	// refillAt: a sequential run is refilled once less than 1/refillAt of its window,
	// and less than its lead, is requested ahead of it. Half a window: a refill is then at
	// least half a window, one round trip for a large range.
	refillAt = 2
	// unansweredShort is the most a range not yet answered may have left and still let a
	// refill go out beside it (Busy): a seek's demand range and a block. Sharing the
	// link with it costs its reader a few tens of milliseconds on a 30 MB/s link; holding
	// the refill back costs a round trip.
	unansweredShort = 1<<20 + 256<<10
)

// Read is one read as the fetcher schedules it: the blocks [First, End) it needs and the
// read-ahead policy's decision for it. With Policy false the decision is ignored (a read
// claiming a lost block again).
type Read struct {
	Dec        readahead.Decision
	Policy     bool
	First, End int64
}

// Sequential reports a read with read-ahead to keep filled: its run's pace counts.
func (r Read) Sequential() bool { return r.Policy && !r.Dec.Ahead.Empty() }

// Setting is what the fetcher knows around a read, as values.
type Setting struct {
	Now     time.Time
	RTT     time.Duration // the origin's smoothed answer time
	MaxLead int64         // bound on the lead, bytes (see Lead)
	// BlockSize and Blocks: the file's block size in bytes and its number of blocks.
	BlockSize, Blocks int64
	// OpenEndedWindow: from this window on a sequential run is one open-ended range,
	// refilled by extending it (fetch.Options.OpenEndedWindow).
	OpenEndedWindow int64
	Split           int   // Splitter.N when the read arrives
	PartSize        int64 // one part of split read-ahead (PartSize at Split)
	// Scanned is the run's read-ahead mark, in blocks: below it every block was claimed
	// or present at the run's last read.
	Scanned int64
	// Busy: the run has a bounded range that delivers more than a round trip's worth
	// still (see Busy).
	Busy bool
	// Left: the reader has left a run of this file that an open-ended range was
	// bringing (it seeked away): its runs are not opened at once (see OpenAtOnce).
	Left bool
}

// Plan is which blocks a read claims: the missing ones of [First, End), in ranges sized
// by Window.
type Plan struct {
	First, End int64
	// Window is the read-ahead window, bytes: the decision's, or the lead when that is
	// larger. Unless OpenEnded, a sequential run's range is bounded to it.
	Window int64
	// OpenEnded: a sequential run's range is one open-ended range, refilled by extending
	// it: the run is not split and its window reached OpenEndedWindow, or OpenAtOnce when
	// it begins in the file's first OpenAtOnce bytes and its reader has not left an
	// open-ended range (Setting.Left).
	OpenEnded bool
}

// Claim plans read r. For a sequential read run is the state of its run, which sees
// the read (its rate estimate moves), and the plan reaches the lead past the run's
// furthest point; otherwise run is not used and may be nil.
//
// A bounded run is refilled only once what it has requested ahead falls below both its
// lead and 1/refillAt of its window: refilling bounded ranges only below this low-water
// mark keeps them large (one round trip each) and leaves a slow reader that seeks away
// with at most its first window in flight. An open-ended range is exempt (extending it
// costs no request), and so is split read-ahead, whose parts are large already.
func Claim(r Read, run *Run, s Setting) Plan {
	bs, dec := s.BlockSize, r.Dec
	up := func(off int64) int64 { return (off + bs - 1) / bs }
	p := Plan{First: r.First, End: r.End, Window: dec.Ahead.Len()}
	if r.Policy {
		if f := dec.Fetch; !f.Empty() {
			p.First = min(p.First, f.Off/bs)
			p.End = max(p.End, up(f.End))
		}
		if a := dec.Ahead; !a.Empty() {
			p.End = max(p.End, up(a.End))
		}
	}
	if r.Sequential() {
		lead := min(run.Lead(s.Now, dec, s.RTT, s.MaxLead), Proven(dec))
		if n := int64(s.Split); n > 1 {
			// Parallel parts need a window that holds them all, or the splitter would
			// judge n streams while fewer run. PartSize keeps n parts within MaxLead,
			// so a trial that is judged a loss leaves at most that much in flight.
			lead = max(lead, n*s.PartSize)
		}
		p.Window = max(p.Window, lead)
		requested := s.Scanned*bs - dec.Ahead.Off
		single := s.Split <= 1
		p.OpenEnded = single && (p.Window >= s.OpenEndedWindow || !s.Left && p.Window >= OpenAtOnce && dec.Start < OpenAtOnce)
		bounded := single && !p.OpenEnded
		demand := max(r.End, up(dec.Fetch.End)) // what this read itself needs
		switch {
		case bounded && requested >= max(lead, dec.Ahead.Len()/refillAt):
			p.End = min(p.End, demand) // enough is requested ahead
		case bounded && s.Busy:
			// The refill waits for the range in flight to near its end (Busy).
			p.End = min(max(p.End, up(dec.Ahead.Off+lead)), demand)
		default:
			p.End = max(p.End, up(dec.Ahead.Off+lead))
		}
		if p.OpenEnded && run.Rate() > 0 {
			// One range read at its reader's pace: it claims what Paced allows, not its
			// window.
			p.End = min(p.End, max(demand, up(dec.Ahead.Off+Paced(lead, run.Rate(), dec))))
		}
	}
	p.End = min(p.End, s.Blocks)
	return p
}

// OpenAtOnce is the least window with which a run that begins in the file's first
// OpenAtOnce bytes has its range open-ended from its first claim, unless its reader has
// left an open-ended range of the file before: a player's or a copy's first window
// (readahead.Config.InitialWindow, 5 MiB), not a parser's (ProbeWindow, 2 MiB). A run
// that begins further in is a seek's, and a demuxer decoding one frame at its target
// stops after a few MB: an open-ended range it left would bring what the path buffers
// on top (FFmpeg -ss 45 into an MKV: 10.6 MB from the origin against 5.5 bounded), so
// it is bounded as before.
//
// Why: on a link the kernel shares, each range is a TCP flow, and the bottleneck divides
// itself between flows, not between readers. A player whose window is fetched as a
// series of bounded ranges starts a flow per refill, in slow start, beside its own
// earlier one or on a new connection, while the other players' flows run at the rate
// they reached; eight 3 MB/s players on a 30 MB/s link froze 100 to 300 times after
// their first 10 s so. With one range each, read at the reader's pace (Paced) and held
// back by the receive window when ahead (ReceiveWindow), every player is one flow that
// takes what its reader takes and leaves the rest to the ones that wait: no freeze after
// 4.5 to 7.5 s. A reader that seeks away leaves an open-ended range with what the path
// buffers (several MB on a 200 ms link), so a reader that has left one gets bounded
// ranges again, as before, until its window reaches OpenEndedWindow.
const OpenAtOnce = 4 << 20

const (
	// pacedFloor: an open-ended run claims at least this much play ahead, whatever the
	// round trip; on a 25 ms link three round trips are 75 ms of play, which one slow
	// answer from an object store exceeds.
	pacedFloor = time.Second
	// pacedGrowth: past the floor, a run's claims grow by 1/pacedGrowth of what it has
	// consumed, up to its window. Eight 3 MB/s players on a 30 MB/s link then add 1.5 MB/s
	// between them, a quarter of what the link has spare.
	pacedGrowth = 16
)

// Paced is how far past its furthest point an open-ended run consuming bps bytes a
// second claims: lead, or a second of its rate plus a sixteenth of what it has
// consumed when that is more, but no more than its window then (dec).
//
// Why: an open-ended range claimed to its window reads its whole window as fast as the
// line lets it, and while it does it takes a flow's share of a shared line whether its
// reader waits or not; its window grows to 64 MiB, so eight players keep filling
// windows for 20 s. Claimed so, a run's range runs ahead of its reader by about a second
// and grows slowly; once there it reads at its reader's rate.
func Paced(lead int64, bps float64, dec readahead.Decision) int64 {
	ahead := int64(bps*pacedFloor.Seconds()) + dec.Consumed/pacedGrowth
	return max(lead, min(ahead, dec.Ahead.Len()))
}

// provenAhead bounds a run's lead by its consumption: at most this many times what the
// run has consumed may be requested past its furthest point, beyond its window. A reader
// that stops after C bytes has then cost at most about (1+provenAhead)·C, the three
// times the seek scenario and the player targets allow. Two is enough ahead for
// a fast reader: a 20 MB/s player wants 12 MB on a 200 ms link (leadRTTs), which it has
// proven after 6 MB, 0.3 s of its play, while its first 5 MiB window carries it there.
// Without it, FFmpeg decoding from -ss 45 read 2.7 MB in a third of a second, which
// reads as 20 MB/s, and was sent a 13 MB lead.
const provenAhead = 2

// Proven is the most read-ahead dec's run has earned past its furthest point, bytes:
// its window (the policy's own bound, grown with consumption) or provenAhead times its
// consumption, whichever is larger.
func Proven(dec readahead.Decision) int64 {
	return max(dec.Ahead.Len(), provenAhead*dec.Consumed)
}

// MinPart is the fewest missing blocks at the tail of a split run's window that open a
// part of their own: a whole part, or 1/refillAt of the window if that is less, at least
// one block. The window's tail grows a block per read; waiting for this much rather than
// opening a range per block keeps parts large.
func MinPart(part, window, bs int64) int64 {
	return max(min(part, window/refillAt)/bs, 1)
}

// InFlight is the progress of one bounded range of a run still delivering.
type InFlight struct {
	FirstAt  time.Time // when its first block arrived; zero while it has not answered
	FirstOff int64     // that block's offset
	Next     int64     // offset of its next byte
	Want     int64     // it reads up to here
}

// Busy reports whether one of a run's bounded ranges still delivers more than it
// delivers in one round trip of rtt, plus a block of bs bytes (or has not answered yet
// and is not short). A new range opened now would share the link with it, so the nearer
// bytes would arrive later (nearest block first); opened once the rest is within a round
// trip, its first byte comes as the last one of the old range does.
func Busy(now time.Time, rtt time.Duration, bs int64, ranges []InFlight) bool {
	for _, f := range ranges {
		if f.FirstAt.IsZero() {
			// Not answered yet: busy unless it is short (a seek's demand range). A
			// refill held back then waits for the next read, and at the start the
			// readers are all waiting for this very range: the refill would go out a
			// round trip late, as the shuffled scenario's four threads showed.
			if f.Want-f.Next > unansweredShort {
				return true
			}
			continue
		}
		elapsed := max(now.Sub(f.FirstAt), minRateSpan)
		rate := float64(f.Next-f.FirstOff) / elapsed.Seconds()
		if float64(f.Want-f.Next) > rate*rtt.Seconds()+float64(bs) {
			return true
		}
	}
	return false
}

// continueMargin is how many times over the reader's lead must cover a continued
// range's wait (see Continue). Two: a run's rate estimate in its first second
// underestimates a fast reader (a 20 MB/s player read as 10 MB/s 40 ms after its first
// data), and with a margin of one its refill waited and it froze for 58 ms on a link
// without slow start.
const continueMargin = 2

// RampBytes is the span the fetcher times twice at the start of a new range to measure
// slow start (fetch's ramp, Continue): a MiB, several congestion windows of ten segments
// on a 200 ms link, four blocks at a link's full rate. Larger, fewer first ranges are
// long enough to be timed; smaller, the second span is still in slow start and the
// difference reads low.
const RampBytes = 1 << 20

// continueHeadroom: a range delivering less than this many times its reader's rate
// has no headroom to share with a range beside it (see Continue). A fourth over: the
// rate estimate of a reader waiting on its range is the range's rate, give or take the
// bursts of its reads.
const continueHeadroom = 1.25

// Continue reports whether a run's refill should wait for the run's bounded range f,
// which ends at end, to finish, and then go on that range's connection, rather than on a
// range of its own opened now. The reader is at its furthest point and consumes bps
// bytes/s.
//
// On a TCP link a connection's congestion window is what it has learned of the path.
// Reused within a round trip of going quiet, it sends the refill at the rate it reached;
// a spare connection, or one idle past the retransmission timeout, starts again from ten
// segments and brings a few megabytes over 200 ms in a second or more of slow start.
// So the refill waits for the range when one of these holds:
//   - the reader will not catch up with end while it waits: (end - furthest)/bps is at
//     least continueMargin times the range's rest, at the rate it has delivered since its
//     first byte, plus a round trip of rtt;
//   - or the reader waits on the range (its furthest point has reached the range's next
//     byte) and the range, delivering for a round trip at least, delivers less than
//     continueHeadroom times the reader's rate: the link, or the range's own slow start,
//     is the limit, and a range beside it would share that link and start cold, bringing
//     the reader's next blocks later. (Within its first round trip a range's rate is its
//     first burst, and every reader of a new run waits on it.)
//   - or this range delivers its rest within ramp, the slow start of the fetcher's new
//     ranges: how much longer their first RampBytes took than their second (0 while
//     unknown). A new range asked now brings the bytes past end a round trip and ramp
//     after its request, at the rate this one delivers; this range brings them a round
//     trip after its rest, at the rate its connection reached. Without slow start ramp
//     is about 0 and only a range that has delivered everything qualifies.
//
// Otherwise (a reader close behind a range that outpaces it) the refill goes at once on
// a range of its own, so its round trip overlaps the old range's last bytes: a 20 MB/s
// player on a 30 MB/s link whose refills waited froze for a round trip. A range not
// answered yet does not qualify, nor, but for the third reason, a reader whose rate is
// not known.
func Continue(now time.Time, rtt, ramp time.Duration, bps float64, furthest, end int64, f InFlight) bool {
	if f.FirstAt.IsZero() || end <= furthest {
		return false
	}
	elapsed := max(now.Sub(f.FirstAt), minRateSpan)
	delivery := float64(f.Next-f.FirstOff) / elapsed.Seconds()
	if ramp > 0 && delivery > 0 && float64(end-f.Next)/delivery <= ramp.Seconds() {
		// Whatever the reader's rate: a reader that waits on every read behind a range
		// still in slow start has no rate estimate yet (rateEst), and is the one a cold
		// range beside it would hold up longest.
		return true
	}
	if bps <= 0 {
		return false
	}
	if furthest >= f.Next && delivery < continueHeadroom*bps && now.Sub(f.FirstAt) >= rtt {
		return true
	}
	if delivery <= 0 {
		return false
	}
	wait := float64(end-f.Next)/delivery + rtt.Seconds()
	return float64(end-furthest)/bps >= continueMargin*wait
}

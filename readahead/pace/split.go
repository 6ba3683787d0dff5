package pace

import "time"

// The split: parallel range streams. An object store caps each connection (tens of MB/s
// per GET), so a sequential reader there is only as fast as its connections are many; a
// long shared link gains nothing from splitting and pays a request per part. Neither is
// known in advance, so the split is measured: while a file's sequential readers are
// starved (at least half their reads wait for read-ahead, and the file takes at least
// half of what the fetcher delivers: see trialShare), it tries MaxN streams, and keeps
// them only if the bytes delivered by the whole fetcher rose by splitGain over the next
// probe interval; otherwise it falls back and stays there for splitHold. In split mode
// the read-ahead is cut into bounded parts of PartSize (smaller when n parts of it would
// pass MaxLead), each its own range, nearest part first.

const (
	// splitProbe is how long a stream count runs before its rate is judged: five round
	// trips of the origin, so new ranges pass their first round trip and reach speed, but
	// at least splitProbeMin (timer and scheduling noise) and at most splitProbeMax
	// (a 200 ms link is judged every second).
	splitProbeRTTs = 5
	splitProbeMin  = 150 * time.Millisecond
	splitProbeMax  = time.Second
	// splitGain is the rise in delivery rate that justifies more streams; below it the
	// link, not the connection, is the limit.
	splitGain = 1.3
	// splitHold is how long a failed doubling is not retried, so a shared link is probed
	// a few times a minute at most.
	splitHold = 30 * time.Second
	// starvedShare/starvedOf: a stream count is judged only over an interval in which
	// at least half the sequential reads waited for their read-ahead. A bulk reader
	// waits on most reads; a player waits on a read or two after a seek. The first
	// interval of a file is never judged: while eight players start at once on one
	// link each waits on half its reads, and splitting their read-ahead would only
	// crowd the link with parts they do not need yet.
	starvedShare, starvedOf = 1, 2
	// splitPatience is how many probe intervals in a row readers must be starved before
	// more streams are tried. Eight players starting at once on one far link are
	// starved for a second or two while their first windows share it; a trial then
	// would add parts for every one of them and crowd the link for many seconds. A bulk
	// reader is starved all along: on an object store it is split after about a second.
	splitPatience = 3
	// soloShare/soloOf: a file read alone gets its trial after one interval when at
	// least nine in ten of its reads waited. A copy waits on every read; a player that
	// starts at 20 MB/s on a 30 MB/s link waits on fewer, and a trial would split the
	// link its nearest blocks need among sixteen parts.
	soloShare, soloOf = 9, 10
	// soloProbeRTTs/soloProbeMin/soloSamples: the first interval of such a file (its
	// baseline at one connection) is two round trips, at least soloProbeMin and soloOf
	// reads (soloSamples from a capped source), instead of five round trips. Four
	// threads playing one file at 20 MB/s on the far link all wait at their start: with
	// five reads they passed for a copy, got sixteen parts and froze 7 to 19 times per
	// trial; with ten they do not. On an object store each round
	// trip spent on one connection costs the copy a fifteenth of what the split
	// delivers. The baseline only has to tell one connection from sixteen (the trial
	// must gain 1.3x, an object store gives 10x), so a short one is enough. Data flows
	// from the first read that updates the splitter on (that read waited for the first
	// range), so two round trips measure one connection's rate; on a shared link the
	// trial is still judged over the full probe and rejected. A far link (200 ms) keeps
	// its two round trips: a 20 MB/s player's first round trip on a 30 MB/s link may
	// all wait, and a trial would split what its nearest blocks need.
	soloProbeRTTs = 2
	// cappedProbeRTTs: the baseline when the source says its connections are capped
	// (Sample.Capped: an object store). One round trip: a 300 MB copy from MinIO on the
	// cloud link (40 ms, 25 MB/s per connection) takes about a second at full speed,
	// and two round trips held it at 84% of sixteen connections.
	cappedProbeRTTs = 1
	soloProbeMin    = 50 * time.Millisecond
	soloSamples     = 5
	// trialShare/trialShareOf: a trial is started only by a file that received at
	// least half of what the fetcher delivered over the interval. Eight players on one
	// far link each wait on half their reads while their windows grow, each taking an
	// eighth of the link; a trial by one of them requests sixteen parts at once and
	// freezes the other seven (two of five bench trials of the streams scenario: over
	// 150 freezes, the link shared by 16 parts for a minute). Two copies side by side
	// on an object store each take half, and are still split.
	trialShare, trialShareOf = 1, 2
	// soloProof, soloProofRTTs: a file read alone from a source that does not cap its
	// connections is taken for a copy only once its run has consumed soloProof bytes or
	// its first measurement interval has lasted soloProofRTTs round trips (intervals end
	// by splitProbeMax, so past a 250 ms round trip only the bytes prove it). A demuxer
	// after a seek reads as fast as its data arrives, and so waits on every read as a
	// copy does, for the group of pictures it decodes up to its target (a few MB, in less
	// than two round trips): a trial would send it sixteen parts it never reads. A copy
	// keeps waiting, and loses only the wait at one connection: four round trips, or
	// what consuming 8 MiB takes. A run that began with a seek (seekStart) is proven
	// by its bytes alone: on a TCP path its connection starts in slow start, and the
	// same few MB then take longer than four round trips (FFmpeg decoding from -ss 30 in
	// an MKV on the kernel-shaped far link read 5.5 MB in a second and was split: the
	// origin wrote 19 MB for it and 47 MB for the -ss 45 after it, which the file's split
	// carried, and that first frame took 2.1 s instead of 0.56). A copy starts at the
	// head. An object store (Capped), where the split is the copy's speed, keeps its early
	// trial.
	soloProof     = 8 << 20
	soloProofRTTs = 4
	// seekStart: a run that begins this far into the file is a seek's (or a handle's
	// resumed past the head), not a copy's. Past what a scan leaves of a file's head in
	// the kernel's page cache, so that a copy of a file a scanner probed, whose first
	// reads the page cache answers, still starts at the head: ffprobe and its kernel's
	// read-ahead reach 512 KiB, FFmpeg's first frame of an MKV 0.98 MiB. A copy that
	// starts further in (dd skip=, a resumed or sectioned copy) waits for soloProof.
	seekStart = 2 << 20
)

// Splitter is the per-file controller of parallel range streams. The zero Splitter
// allows one stream.
type Splitter struct {
	n                int       // streams allowed for read-ahead (1 = one open-ended stream)
	prevN            int       // n before the last change; 0 when n was not just raised
	prevRate         float64   // delivery rate, bytes/s, measured with prevN
	trialRate        float64   // delivery rate of the last trial judged, bytes/s
	settle           time.Time // a trial's rate is measured from here (see Sample.Ramp)
	since            time.Time // start of the current measurement
	deliveredAt      int64     // Sample.Delivered at since
	ownAt            int64     // Sample.Own at since
	starvedAt        int64     // Sample.Starved at since
	holdUntil        time.Time // no doubling before this
	peak             int       // highest n tried
	warm             bool      // the first interval has passed
	starvedIntervals int       // consecutive intervals in which readers were starved
	samples          int       // Update calls in this measurement
}

// Sample is what the fetcher measured when a sequential read of the file arrives. The
// counts are cumulative; the Splitter takes differences.
type Sample struct {
	Now time.Time
	RTT time.Duration // the origin's smoothed answer time
	// Ramp is how much longer new ranges take for their first MiB than for their next
	// (slow start; 0 while not measured). A trial's rate is measured from a round trip
	// and Ramp after it starts: its parts are new ranges, most on new connections (a
	// handshake, then slow start beside the connection already at speed). Judged from
	// the trial's start, sixteen parts on the kernel-shaped far link, which one
	// connection cannot fill (a 4 MB send buffer), showed no gain over the first second
	// in some runs, and a 20 MB/s player was held to one connection for splitHold.
	Ramp time.Duration
	// Delivered counts the bytes every file of the fetcher received, so a file that
	// takes more of a shared link from the others shows no gain.
	Delivered int64
	// Own counts this file's bytes, for its share of the link (trialShare).
	Own int64
	// Starved counts this file's sequential reads that waited for their read-ahead.
	Starved int64
	MaxN    int  // the most range streams to try (fetch.Options.MaxParallel)
	Solo    bool // no other file is open in the fetcher
	// Capped: the source caps each connection (an object store), so a copy read alone
	// is split after a baseline of cappedProbeRTTs, with its connections dialed during
	// it (Expecting).
	Capped bool
	// Consumed is the bytes the read's run has consumed (readahead.Decision.Consumed).
	Consumed int64
	// Start is where the read's run began (readahead.Decision.Start): from seekStart on,
	// a seek's run, proven a copy by its bytes alone (soloProof).
	Start int64
}

// Update judges the current stream count and decides the next one. More streams are
// tried only after splitPatience intervals in which sequential readers kept waiting for
// their read-ahead (starvedShare), because only then does the delivery rate measure the
// streams rather than the readers; the trial itself is judged on the delivery rate
// alone.
//
// With Solo no other reader shares the link, so when nearly every read waited
// (soloShare) neither the start-up interval nor the patience that protects players
// starting together applies, and the reader gets its trial after one interval.
func (sp *Splitter) Update(s Sample) {
	now, rtt, delivered, own, starved, maxN, solo := s.Now, s.RTT, s.Delivered, s.Own, s.Starved, s.MaxN, s.Solo
	if sp.n == 0 {
		sp.n = 1
	}
	sp.samples++
	if sp.since.IsZero() {
		sp.reset(now, delivered, own, starved)
		return
	}
	if sp.prevN > 0 && now.Before(sp.settle) {
		// The trial's parts are still on their way up (see Sample.Ramp): its interval
		// starts once they are past it.
		sp.reset(now, delivered, own, starved)
		return
	}
	elapsed := now.Sub(sp.since)
	// A file read alone whose reads nearly all waited is a copy, not a player catching
	// up after its start (see soloShare): it is judged from its first interval, which
	// is shorter (see soloProbeRTTs).
	// Starved counts the reads before this one: whether this one waits is known only
	// after Update. So samples-1 reads are judged, and a copy is hungry from its fifth
	// read on, not its tenth (nine in ten of n reads, one of which is not yet counted,
	// needs n >= 10: a copy from an object store lost 50 ms to that before its trial).
	judged := int64(sp.samples - 1)
	proven := s.Capped || s.Consumed >= soloProof || s.Start < seekStart && elapsed >= soloProofRTTs*rtt
	hungry := solo && judged > 0 && (starved-sp.starvedAt)*soloOf >= judged*soloShare && proven
	probe := min(max(splitProbeRTTs*rtt, splitProbeMin), splitProbeMax)
	rtts, samples := time.Duration(soloProbeRTTs), soloOf
	if s.Capped {
		rtts, samples = cappedProbeRTTs, soloSamples
	}
	if hungry && !sp.warm && sp.samples >= samples {
		probe = min(max(rtts*rtt, soloProbeMin), probe)
	}
	if elapsed < probe {
		return
	}
	if !sp.warm && !hungry { // the start-up interval (see starvedShare)
		sp.warm = true
		sp.reset(now, delivered, own, starved)
		return
	}
	sp.warm = true
	rate := float64(delivered-sp.deliveredAt) / elapsed.Seconds()
	if sp.prevN > 0 {
		sp.judgeTrial(now, rate)
		sp.reset(now, delivered, own, starved)
		return
	}
	if (starved-sp.starvedAt)*starvedOf < int64(sp.samples)*starvedShare {
		// Readers were not starved: no reason for more streams.
		sp.starvedIntervals = 0
		sp.reset(now, delivered, own, starved)
		return
	}
	sp.starvedIntervals++
	if sp.starvedIntervals < splitPatience && !hungry {
		sp.reset(now, delivered, own, starved)
		return
	}
	share := (own-sp.ownAt)*trialShareOf >= (delivered-sp.deliveredAt)*trialShare
	if sp.n < maxN && now.After(sp.holdUntil) && share {
		// Try the most streams at once: a reader starved this long reads everything it
		// asked for, so a trial costs no waste, and one step instead of three doublings
		// is the difference between reaching an object store's speed in a fraction of
		// a second and in three probes.
		sp.prevN, sp.prevRate, sp.trialRate = sp.n, rate, 0
		sp.settle = now.Add(rtt + s.Ramp)
		sp.n = maxN
		sp.peak = max(sp.peak, sp.n)
	}
	sp.reset(now, delivered, own, starved)
}

// judgeTrial keeps the trial's stream count or falls back to the one before it, by the
// delivery rate measured during the trial. A trial is judged on that rate alone,
// starved or not: a trial that works is one whose readers stop waiting, so their waits
// cannot be the test. A reader that slowed down by itself shows no gain, and the trial
// is dropped.
func (sp *Splitter) judgeTrial(now time.Time, rate float64) {
	sp.trialRate = rate
	if rate < sp.prevRate*splitGain {
		sp.n, sp.holdUntil = sp.prevN, now.Add(splitHold)
	}
	sp.prevN, sp.starvedIntervals = 0, 0
}

// Expecting reports, after Update with s, that a trial is likely within the current
// interval: a file read alone from a source that caps connections (Sample.Capped),
// before its first interval is judged, whose sequential reads since the first have all
// waited (a copy), with more streams allowed and none held off. The fetcher then has
// connections dialed for the trial's streams: each would otherwise pay a handshake when
// the trial opens it (twelve at once for a copy on the cloud link, a round trip each,
// before the first byte of the trial).
func (sp *Splitter) Expecting(s Sample) bool {
	return s.Capped && s.Solo && sp.n < s.MaxN && !sp.warm && sp.samples >= 2 &&
		s.Starved-sp.starvedAt >= int64(sp.samples-1) && s.Now.After(sp.holdUntil)
}

// reset starts a new measurement.
func (sp *Splitter) reset(now time.Time, delivered, own, starved int64) {
	sp.since, sp.deliveredAt, sp.ownAt, sp.starvedAt = now, delivered, own, starved
	sp.samples = 0
}

// Restart forgets the stream count and its measurements, keeping a failed trial's hold:
// after a seek the next reads start a new run, which must earn its split again (split
// read-ahead keeps n parts in flight, far more than a seeking player reads).
func (sp *Splitter) Restart() {
	*sp = Splitter{holdUntil: sp.holdUntil, peak: sp.peak}
}

// Rates are the delivery rates, bytes/s, of the last trial: before it, and during it
// (0 until it is judged).
func (sp *Splitter) Rates() (before, trial float64) { return sp.prevRate, sp.trialRate }

// N is the number of range streams read-ahead may be split into; 0 or 1: one stream.
func (sp *Splitter) N() int { return sp.n }

// Peak is the highest N tried.
func (sp *Splitter) Peak() int { return sp.peak }

// Held reports that a trial of more streams was judged a loss, so none is tried again
// until splitHold has passed since.
func (sp *Splitter) Held() bool { return !sp.holdUntil.IsZero() }

// StarvedIntervals is how many probe intervals in a row the file's readers were starved.
func (sp *Splitter) StarvedIntervals() int { return sp.starvedIntervals }

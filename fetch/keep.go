package fetch

import (
	"time"

	"github.com/playhead/playhead/cache"
)

// Read-ahead kept in memory until its reader comes.
//
// A fast sequential reader's read-ahead lands in the cache (writer.go) well before the
// reader asks for it, and reading it back then costs a pread and a checksum pass over
// every block, a large share of the daemon's CPU in a fast copy. So a block that lands
// before any reader had it stays in memory, in the buffer it arrived in, and the first
// read of it takes it from there. The bytes are the ones the store was given, with the
// checksum the stream computed as they arrived, so the reader gets what a read from the
// cache would have given it, without reading it back.
//
// A held block (a block from its owner, which this node does not cache: writer.go) is
// not in this cache to be read back. It is kept until its readers have taken all its
// bytes (a player's unaligned reads take a block in two, in either order), whether they
// waited for it or came after it landed.
//
// Invariants:
//   - a kept entry holds one reference to its buffer; the first reader takes it over
//     (takeKept), so an entry is read from memory at most once and later reads of the
//     block go to the cache as before; a held entry lends each reader a reference of its
//     own until the readers have taken every byte, then hands its own to the last one;
//   - a block is kept only if no reader had it, a held one only if its readers take part
//     of it: wait registers the read under mu together with dropping its waiter, schedule
//     adds what each read takes (pending.covered) under mu, and keep checks under mu;
//   - the entries of every File together hold at most Options.KeepBytes: an entry is
//     added only after its bytes were reserved in Fetcher.keptBytes (a reservation that
//     fails is returned at once, so the counter may pass the bound for an instant, the
//     entries never);
//   - a File whose object changed, or whose last handle closed, keeps nothing: both set
//     under mu a state (err, released) that keep checks under mu, and drop what they
//     held at that moment.
//
// An entry not taken within keepAge is let go, within keepAge more: a slow player reads
// its lead many seconds after it landed and has the CPU for a pread, and the memory is
// worth more to a fast reader. A File lets its old entries go when it lands another
// block; every open File does when the budget is spent (sweepKept), and on a timer that
// runs while anything is kept (keepTick), so a File that lands nothing more (its reader
// paused or gone) does not hold its entries until its last handle closes. A held entry
// no reader has touched is left by the timer and the File's own landings, since its
// reader would have to ask the owner again; only a sweep lets it go, to the cache
// (writeSwept). A held entry a reader took part of is timed from that read.

// defaultKeepAge is Fetcher.keepAge: how long a landed block waits in memory for its
// reader. At loopback and LAN rates a copy reads its 64 MiB lead within a second of it
// landing.
const defaultKeepAge = 2 * time.Second

// keptBlock is a landed block waiting for its first reader.
type keptBlock struct {
	bb   *blockBuf
	data []byte
	at   time.Time // when it landed, or a reader last took part of it (held)
	held bool      // not in the cache (landHeld): kept until got reaches len(data)
	got  int64     // bytes of it readers have taken (held only)
}

// timed reports an entry the keep timer lets go once it is keepAge old: any but a held
// one no reader has touched yet.
func (k keptBlock) timed() bool { return !k.held || k.got > 0 }

// keep keeps block b, just landed from p, for its first reader when nobody has had it;
// a held one (landHeld) also when its readers take only part of it (p.covered). It
// reports whether it kept it, and whether it found the budget spent (the caller then
// calls sweepKept, without mu). Caller holds mu.
func (fl *File) keep(b int64, p *pending, now time.Time, held bool) (kept, spent bool) {
	fl.expireKept(now, false, false)
	had := p.waiters > 0 || p.read.Load()
	if fl.f.opts.KeepBytes <= 0 || fl.err != nil || fl.released || p.err != nil || p.buf == nil || p.swept ||
		!held && had || held && p.covered >= int64(len(p.data)) {
		return false, false
	}
	if _, ok := fl.kept[b]; ok {
		return false, false
	}
	if fl.f.keptBytes.Add(fl.bs) > fl.f.opts.KeepBytes {
		fl.f.keptBytes.Add(-fl.bs)
		return false, true
	}
	p.buf.ref()
	fl.kept[b] = keptBlock{bb: p.buf, data: p.data, at: now, held: held, got: p.covered}
	if len(fl.kept) == 1 || now.Before(fl.keptOldest) {
		fl.keptOldest = now // an untouched held entry is not timed: at worst a walk early
	}
	fl.f.armKeepTick()
	return true, false
}

// takeKept returns kept block b, of which the caller reads n bytes, with a reference for
// the caller: the entry's own, as it forgets the entry, unless it is a held one whose
// bytes readers have not all taken yet. Caller holds mu.
func (fl *File) takeKept(b, n int64) (*blockBuf, []byte, bool) {
	k, ok := fl.kept[b]
	if !ok {
		return nil, nil, false
	}
	if k.held {
		if k.got += n; k.got < int64(len(k.data)) {
			k.at = time.Now()
			fl.kept[b] = k
			k.bb.ref()
			return k.bb, k.data, true
		}
	}
	delete(fl.kept, b)
	fl.f.keptBytes.Add(-fl.bs)
	return k.bb, k.data, true
}

// expireKept lets go of the entries older than keepAge, those held elsewhere only when
// held is set, or of all of them. Caller holds mu.
//
// An untouched held entry a sweep (held) lets go is in no cache here and its reader has
// not come: it becomes a pending entry again, returned for the caller to write to the
// cache without mu (writeSwept), so its reader finds it pending meanwhile and in the
// cache after, and does not ask the owner for it a second time.
func (fl *File) expireKept(now time.Time, all, held bool) (swept []sweptBlock) {
	age := fl.f.keepAge
	if len(fl.kept) == 0 || !all && !held && now.Sub(fl.keptOldest) < age {
		return nil
	}
	oldest := now // of the timed entries: an untouched held one waits for its reader
	for b, k := range fl.kept {
		if all || now.Sub(k.at) >= age && (held || k.timed()) {
			delete(fl.kept, b)
			fl.f.keptBytes.Add(-fl.bs)
			if !all && !k.timed() && fl.pending[b] == nil {
				p := &pending{data: k.data, buf: k.bb, done: closedChan, swept: true} // the entry's reference is p's
				fl.pending[b] = p
				swept = append(swept, sweptBlock{b, p})
				continue
			}
			k.bb.unref()
		} else if k.timed() && k.at.Before(oldest) {
			oldest = k.at
		}
	}
	fl.keptOldest = oldest
	return swept
}

// sweptBlock is a held block a sweep let go of, pending until it is written.
type sweptBlock struct {
	b int64
	p *pending
}

// writeSwept queues the blocks expireKept returned for the cache, with the checksum
// their streams skipped. A full queue drops them (queueWrite): their readers then ask
// the owner again. Call without mu.
func (fl *File) writeSwept(swept []sweptBlock) {
	for _, s := range swept {
		if fl.f.sums != nil {
			s.p.buf.sum = cache.Checksum(0, s.p.data)
		}
		fl.f.queueWrite(fl, s.b, s.p, false, false)
	}
}

// sweepKept lets go of the expired entries of every open File when the budget is spent,
// those held elsewhere too, at most once per keepAge/4. Call without any lock held.
func (f *Fetcher) sweepKept(now time.Time) {
	last := f.keptSwept.Load()
	if now.UnixNano()-last < int64(f.keepAge/4) || !f.keptSwept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	f.expireAll(now, true)
}

// armKeepTick starts the timer of keepTick unless it runs already.
func (f *Fetcher) armKeepTick() {
	if f.keepTicking.CompareAndSwap(false, true) {
		time.AfterFunc(f.keepAge, f.keepTick)
	}
}

// keepTick lets go of the expired entries of every open File, and runs again a keepAge
// later while anything is still kept. A keep that arms the timer between the flag's
// reset and the check below starts the one timer that then runs.
func (f *Fetcher) keepTick() {
	f.expireAll(time.Now(), false)
	f.keepTicking.Store(false)
	if f.keptBytes.Load() > 0 {
		f.armKeepTick()
	}
}

// expireAll lets go of the expired entries of every open File, those held elsewhere only
// when held is set. Call without any lock held.
func (f *Fetcher) expireAll(now time.Time, held bool) {
	f.mu.Lock()
	files := make([]*File, 0, len(f.files))
	for _, fl := range f.files {
		files = append(files, fl)
	}
	f.mu.Unlock()
	for _, fl := range files {
		fl.mu.Lock()
		swept := fl.expireKept(now, false, held)
		fl.mu.Unlock()
		fl.writeSwept(swept)
	}
}

package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/origin"
)

// shuffledCase is what the kernel's asynchronous read-ahead does to a FUSE daemon: one
// sequential playback arriving as ShuffledPiece reads from ShuffledThreads threads, out
// of order within windows of ShuffledWindow pieces. A filesystem that tracks streams by
// "the next offset" sees random reads here and stops reading ahead.
//
// Schedule (the player's, per piece): window 0 is issued at once and its completion is
// the startup, t0. Piece k is due at t0 + shift + k*piece/rate, so window w's first
// piece is due when window w-1 has played; window w is issued one window earlier (when
// window w-1 starts playing), shuffled, onto a queue the threads take pieces from. A
// piece completing more than play.DefaultFreezeThreshold after its due time is a freeze,
// and, as in bench/play, the timeline then shifts by its lateness (the player
// rebuffers), so one slow piece is one freeze. Pieces are judged in offset order, as
// playback consumes them.
func shuffledCase(s Sizes) Case {
	p := mediaName("shuffled", 0)
	files := map[string]origin.File{p: newFile(p, s.ShuffledFile)}
	return Case{
		Scenario:  "shuffled",
		Name:      fmt.Sprintf("shuffled %d threads %s", s.ShuffledThreads, rateLabel(s.ShuffledRate)),
		Files:     files,
		ReadyFile: p,
		Run: func(ctx context.Context, env Env) (Figures, error) {
			vf, err := mountAndOpen(ctx, env, p, files[p])
			if err != nil {
				return nil, err
			}
			defer vf.Close()
			sh := newShuffler(s, vf)
			f, err := sh.run(ctx)
			if err == nil {
				record(env, sh.reads)
			}
			return f, err
		},
	}
}

// shuffler is the state of one shuffled run.
type shuffler struct {
	s     Sizes
	r     *verifiedFile
	n     int // pieces
	piece time.Duration
	rng   *rand.Rand

	// Written by the threads, each piece's slots once, before closing its done channel.
	done    []chan struct{}
	doneAt  []time.Time
	latency []time.Duration
	read    []int64

	mu    sync.Mutex // guards shift
	shift time.Duration

	reads []Read // every piece, once run succeeded
}

func newShuffler(s Sizes, r *verifiedFile) *shuffler {
	n := int((s.ShuffledFile + s.ShuffledPiece - 1) / s.ShuffledPiece)
	sh := &shuffler{
		s: s, r: r, n: n,
		piece:   time.Duration(float64(s.ShuffledPiece) / float64(s.ShuffledRate) * float64(time.Second)),
		rng:     rand.New(rand.NewPCG(s.ShuffledSeed, uint64(s.ShuffledFile))),
		done:    make([]chan struct{}, n),
		doneAt:  make([]time.Time, n),
		latency: make([]time.Duration, n),
		read:    make([]int64, n),
	}
	for i := range sh.done {
		sh.done[i] = make(chan struct{})
	}
	return sh
}

func (sh *shuffler) getShift() time.Duration {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.shift
}

func (sh *shuffler) run(ctx context.Context) (Figures, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := sh.s.ShuffledWindow
	jobs := make(chan int, sh.n)
	var errMu sync.Mutex
	var threadErr error // the first read error of any thread
	threadError := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return threadErr
	}
	var threads sync.WaitGroup
	for range sh.s.ShuffledThreads {
		threads.Go(func() {
			buf := make([]byte, sh.s.ShuffledPiece)
			for k := range jobs {
				off := int64(k) * sh.s.ShuffledPiece
				size := min(sh.s.ShuffledPiece, sh.s.ShuffledFile-off)
				t0 := time.Now()
				n, err := sh.r.ReadAt(buf[:size], off)
				sh.doneAt[k], sh.latency[k], sh.read[k] = time.Now(), time.Since(t0), int64(n)
				if err != nil {
					errMu.Lock()
					if threadErr == nil {
						threadErr = fmt.Errorf("piece %d at %d: %w", k, off, err)
					}
					errMu.Unlock()
					cancel()
				}
				close(sh.done[k])
			}
		})
	}
	defer func() {
		close(jobs)
		threads.Wait()
	}()

	issue := func(win int) {
		lo, hi := win*w, min((win+1)*w, sh.n)
		idx := make([]int, 0, hi-lo)
		for k := lo; k < hi; k++ {
			idx = append(idx, k)
		}
		sh.rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for _, k := range idx {
			jobs <- k
		}
	}
	wait := func(k int) error {
		select {
		case <-sh.done[k]:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fail := func(err error) (Figures, error) {
		cancel()
		if terr := threadError(); terr != nil {
			return nil, terr // the cause; err is then the cancellation it caused
		}
		return nil, err
	}

	began := time.Now()
	issue(0)
	first := min(w, sh.n)
	var t0 time.Time
	for k := range first {
		if err := wait(k); err != nil {
			return fail(err)
		}
		if sh.doneAt[k].After(t0) {
			t0 = sh.doneAt[k]
		}
	}
	windows := (sh.n + w - 1) / w
	issuerDone := make(chan error, 1)
	go func() {
		for win := 1; win < windows; win++ {
			// Window win is issued when window win-1 starts playing; the shift may grow
			// while we sleep, so look again after waking.
			for {
				d := time.Until(t0.Add(sh.getShift() + time.Duration(win-1)*time.Duration(w)*sh.piece))
				if d <= 0 {
					break
				}
				if err := (play.RealClock()).Sleep(ctx, d); err != nil {
					issuerDone <- err
					return
				}
			}
			issue(win)
		}
		issuerDone <- nil
	}()

	f := Figures{FigFreezes: 0, FigFrozenTotal: 0, FigWorstStall: 0}
	frozen := make([]bool, sh.n)
	latest := time.Duration(-1 << 62)
	for k := first; k < sh.n; k++ {
		if err := wait(k); err != nil {
			<-issuerDone
			return fail(err)
		}
		shift := sh.getShift()
		late := sh.doneAt[k].Sub(t0.Add(shift + time.Duration(k)*sh.piece))
		latest = max(latest, late)
		if late > play.DefaultFreezeThreshold {
			frozen[k] = true
			f[FigFreezes]++
			f[FigFrozenTotal] += late.Seconds()
			f[FigWorstStall] = max(f[FigWorstStall], late.Seconds())
			sh.mu.Lock()
			sh.shift += late
			sh.mu.Unlock()
		}
	}
	if err := <-issuerDone; err != nil {
		return fail(err)
	}
	var bytes int64
	last := t0
	sh.reads = make([]Read, sh.n)
	for k := range sh.n {
		sh.reads[k] = Read{At: sh.doneAt[k].Sub(began).Seconds(), Latency: sh.latency[k].Seconds(), Freeze: frozen[k]}
		bytes += sh.read[k]
		if sh.doneAt[k].After(last) {
			last = sh.doneAt[k]
		}
	}
	if err := threadError(); err != nil {
		return nil, err
	}
	f[FigStartup] = t0.Sub(began).Seconds()
	f[FigReadP99] = percentile(sh.latency, 0.99).Seconds()
	f[FigBytesRead] = float64(bytes)
	f[FigThroughput] = float64(bytes) / last.Sub(began).Seconds()
	if sh.n > first {
		f[FigShuffledPieceLate] = latest.Seconds()
	}
	return f, nil
}

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

	errMu     sync.Mutex // guards threadErr
	threadErr error      // the first read error of any thread

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

// run plays the file through the threads and returns its figures; sh.reads is set
// once it succeeds. Every piece is issued exactly once (window 0 here, the rest by
// issueWindows) and judged once, in offset order, by startup and judge.
func (sh *shuffler) run(ctx context.Context) (Figures, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int, sh.n)
	threads := sh.startThreads(jobs, cancel)
	defer func() {
		close(jobs)
		threads.Wait()
	}()
	fail := func(err error) (Figures, error) {
		cancel()
		if terr := sh.threadError(); terr != nil {
			return nil, terr // the cause; err is then the cancellation it caused
		}
		return nil, err
	}

	began := time.Now()
	sh.issue(jobs, 0)
	first := min(sh.s.ShuffledWindow, sh.n)
	t0, err := sh.startup(ctx, first)
	if err != nil {
		return fail(err)
	}
	issuerDone := make(chan error, 1)
	go func() { issuerDone <- sh.issueWindows(ctx, jobs, t0) }()

	f, frozen, latest, err := sh.judge(ctx, t0, first)
	if err != nil {
		<-issuerDone
		return fail(err)
	}
	if err := <-issuerDone; err != nil {
		return fail(err)
	}
	return sh.figures(f, frozen, latest, began, t0, first)
}

// startThreads starts the ShuffledThreads reading threads, which take pieces from jobs
// until it is closed. Each piece's doneAt, latency and read are written by the one
// thread that took it, before it closes the piece's done channel, so whoever waits on
// done may read them. The first read error is kept for threadError and cancels the run.
func (sh *shuffler) startThreads(jobs <-chan int, cancel context.CancelFunc) *sync.WaitGroup {
	threads := new(sync.WaitGroup)
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
					sh.errMu.Lock()
					if sh.threadErr == nil {
						sh.threadErr = fmt.Errorf("piece %d at %d: %w", k, off, err)
					}
					sh.errMu.Unlock()
					cancel()
				}
				close(sh.done[k])
			}
		})
	}
	return threads
}

func (sh *shuffler) threadError() error {
	sh.errMu.Lock()
	defer sh.errMu.Unlock()
	return sh.threadErr
}

// issue puts window win's pieces on jobs, shuffled. jobs holds every piece, so this
// never blocks.
func (sh *shuffler) issue(jobs chan<- int, win int) {
	w := sh.s.ShuffledWindow
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

// wait waits for piece k to complete, or for ctx to end.
func (sh *shuffler) wait(ctx context.Context, k int) error {
	select {
	case <-sh.done[k]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startup waits for the first window's pieces and returns t0, the completion of its
// last one: playback starts once the whole first window is in.
func (sh *shuffler) startup(ctx context.Context, first int) (time.Time, error) {
	var t0 time.Time
	for k := range first {
		if err := sh.wait(ctx, k); err != nil {
			return time.Time{}, err
		}
		if sh.doneAt[k].After(t0) {
			t0 = sh.doneAt[k]
		}
	}
	return t0, nil
}

// issueWindows issues windows 1 onwards, each when the one before it starts playing
// by the timeline as it stands when it wakes. It is the only caller of issue after startup,
// so sh.rng is never used by two goroutines at once.
func (sh *shuffler) issueWindows(ctx context.Context, jobs chan<- int, t0 time.Time) error {
	w := sh.s.ShuffledWindow
	windows := (sh.n + w - 1) / w
	for win := 1; win < windows; win++ {
		// Window win is issued when window win-1 starts playing; the shift may grow
		// while we sleep, so look again after waking.
		for {
			d := time.Until(t0.Add(sh.getShift() + time.Duration(win-1)*time.Duration(w)*sh.piece))
			if d <= 0 {
				break
			}
			if err := (play.RealClock()).Sleep(ctx, d); err != nil {
				return err
			}
		}
		sh.issue(jobs, win)
	}
	return nil
}

// judge waits for pieces first onwards in offset order, as playback consumes them, and
// counts a freeze for each completing more than play.DefaultFreezeThreshold after it
// was due; a freeze shifts the timeline by its lateness (the player rebuffers). It
// returns the freeze figures, which pieces froze, and the latest any piece was.
func (sh *shuffler) judge(ctx context.Context, t0 time.Time, first int) (Figures, []bool, time.Duration, error) {
	f := Figures{FigFreezes: 0, FigFrozenTotal: 0, FigWorstStall: 0}
	frozen := make([]bool, sh.n)
	latest := time.Duration(-1 << 62)
	for k := first; k < sh.n; k++ {
		if err := sh.wait(ctx, k); err != nil {
			return nil, nil, 0, err
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
	return f, frozen, latest, nil
}

// figures sets sh.reads and completes f once every piece is done and judged.
func (sh *shuffler) figures(f Figures, frozen []bool, latest time.Duration, began, t0 time.Time, first int) (Figures, error) {
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
	if err := sh.threadError(); err != nil {
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

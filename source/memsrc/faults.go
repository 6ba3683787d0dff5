package memsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/playhead/playhead/source"
)

// ErrInjected is the transient error a FaultPlan injects. It is not permanent
// (source.IsPermanent is false), so a fetcher retries it.
var ErrInjected = errors.New("memsrc: injected fault")

// FaultKind says what goes wrong.
type FaultKind int

const (
	// FailOpen makes OpenRange fail with ErrInjected.
	FailOpen FaultKind = iota + 1
	// Changed makes OpenRange fail with source.ErrChanged.
	Changed
	// CutShort ends the body after At bytes with io.ErrUnexpectedEOF, as a dropped
	// connection does.
	CutShort
	// ReadError makes the body's Read fail with ErrInjected once At bytes were read.
	ReadError
	// Hang makes the body deliver At bytes and then block until Close or ctx ends.
	Hang
)

func (k FaultKind) String() string {
	switch k {
	case FailOpen:
		return "fail-open"
	case Changed:
		return "changed"
	case CutShort:
		return "cut-short"
	case ReadError:
		return "read-error"
	case Hang:
		return "hang"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is one planned failure.
type Fault struct {
	// N is the OpenRange call it hits, counting calls on the wrapper from 1. For the body
	// faults (CutShort, ReadError, Hang) it is the body that call returns.
	N    int
	Kind FaultKind
	// At is the body offset, in bytes from the start of the range, where a body fault
	// strikes. Unused for FailOpen and Changed.
	At int64
}

// FaultPlan says which calls of a WithFaults wrapper fail. Planned Faults come first; the
// random rates apply to calls no planned fault hits. Randomness is a hash of Seed and the
// call number, not a shared generator, so call N fails the same way on every run however
// goroutines interleave.
type FaultPlan struct {
	Faults []Fault
	// FailRate is the probability (0 to 1) that an OpenRange fails with ErrInjected.
	FailRate float64
	// CutRate is the probability (0 to 1) that a body is cut short (io.ErrUnexpectedEOF)
	// at a random offset inside its range.
	CutRate float64
	// Seed picks which calls the rates hit.
	Seed int64
}

// faults injects a FaultPlan.
type faults struct {
	inner source.Source
	plan  FaultPlan
	calls atomic.Int64 // OpenRange calls so far
}

// WithFaults returns src with the failures of plan injected into OpenRange and its
// bodies. Stat and List pass through.
func WithFaults(src source.Source, plan FaultPlan) source.Source {
	return &faults{inner: src, plan: plan}
}

func (f *faults) Stat(ctx context.Context, path string) (source.Entry, error) {
	return f.inner.Stat(ctx, path)
}

func (f *faults) List(ctx context.Context, path string) ([]source.Entry, error) {
	return f.inner.List(ctx, path)
}

func (f *faults) String() string { return f.inner.String() + "+faults" }

// Salts that give the two random decisions of one call independent hashes.
const (
	saltFail = 1
	saltCut  = 2
	saltAt   = 3
)

func (f *faults) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	n := f.calls.Add(1)
	fault, planned := f.planned(n)
	if !planned {
		switch {
		case f.plan.FailRate > 0 && f.unit(n, saltFail) < f.plan.FailRate:
			fault = Fault{N: int(n), Kind: FailOpen}
		case f.plan.CutRate > 0 && f.unit(n, saltCut) < f.plan.CutRate:
			fault = Fault{N: int(n), Kind: CutShort, At: -1} // offset picked below
		}
	}
	switch fault.Kind {
	case FailOpen:
		return nil, &source.PathError{Op: "open", Path: path, Off: r.Off,
			Err: fmt.Errorf("%w (open call %d)", ErrInjected, n)}
	case Changed:
		return nil, &source.PathError{Op: "open", Path: path, Off: r.Off,
			Err: fmt.Errorf("%w (injected, open call %d)", source.ErrChanged, n)}
	}
	body, err := f.inner.OpenRange(ctx, path, r, want)
	if err != nil || fault.Kind == 0 {
		return body, err
	}
	if fault.At < 0 {
		length := r.Len
		if size := body.Version().Size; size >= 0 && (length < 0 || r.Off+length > size) {
			length = max(size-r.Off, 0)
		}
		if length <= 0 {
			length = 1 << 20 // open-ended range of unknown size: cut within the first MiB
		}
		fault.At = int64(hash(uint64(f.plan.Seed), uint64(n), saltAt) % uint64(length))
	}
	return &faultyBody{inner: body, g: newGuard(ctx, path), fault: fault, off: r.Off}, nil
}

func (f *faults) planned(n int64) (Fault, bool) {
	for _, ft := range f.plan.Faults {
		if int64(ft.N) == n {
			return ft, true
		}
	}
	return Fault{}, false
}

// unit maps (seed, call, salt) to [0, 1).
func (f *faults) unit(n int64, salt uint64) float64 {
	return float64(hash(uint64(f.plan.Seed), uint64(n), salt)>>11) / (1 << 53)
}

// hash is splitmix64 over the three inputs.
func hash(seed, n, salt uint64) uint64 {
	z := seed ^ n*0x9E3779B97F4A7C15 ^ salt*0xD1B54A32D192ED03
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// faultyBody passes bytes through until fault.At, then fails as fault.Kind says.
type faultyBody struct {
	inner source.Body
	g     *guard
	fault Fault
	off   int64 // range start
	n     int64 // bytes delivered
}

func (b *faultyBody) Read(p []byte) (int, error) {
	if err := b.g.err(b.off + b.n); err != nil {
		return 0, err
	}
	left := b.fault.At - b.n
	if left <= 0 {
		return 0, b.strike()
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.inner.Read(p)
	b.n += int64(n)
	return n, err
}

func (b *faultyBody) strike() error {
	off := b.off + b.n
	switch b.fault.Kind {
	case CutShort:
		return &source.PathError{Op: "read", Path: b.g.path, Off: off, Err: io.ErrUnexpectedEOF}
	case Hang:
		<-b.g.ctx.Done()
		return b.g.err(off)
	default:
		return &source.PathError{Op: "read", Path: b.g.path, Off: off,
			Err: fmt.Errorf("%w (body of open call %d)", ErrInjected, b.fault.N)}
	}
}

func (b *faultyBody) Close() error {
	b.g.close()
	return b.inner.Close()
}

func (b *faultyBody) Version() source.Version { return b.inner.Version() }

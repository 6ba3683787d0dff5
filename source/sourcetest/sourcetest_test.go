package sourcetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/source/sourcetest"
)

// brokenEnv names the mutation TestBrokenSource runs the suite against, in a child
// process of TestSuiteCatchesBrokenSources.
const brokenEnv = "SOURCETEST_MUTATION"

// mutations are ways to break the contract, each with the subtests that must catch it.
// "none" breaks nothing: the suite must pass, or the others prove nothing.
var mutations = []struct {
	name     string
	mustFail []string
}{
	{"none", nil},
	{"shifted-ranges", []string{"Ranges", "ReadSizes", "ParallelRanges"}},
	{"ignores-version", []string{"VersionChange"}},
	{"transient-not-found", []string{"Missing", "Stat", "Paths", "Delete"}},
	{"bare-errors", []string{"Missing", "Stat"}},
	{"short-listing", []string{"ListMany"}},
	{"flat-listing", []string{"List"}},
	{"unstable-version", []string{"Stat"}},
	{"eof-as-error", []string{"Ranges", "ReadSizes"}},
	{"past-end-error", []string{"Ranges"}},
	{"permanent-throttle", []string{"Throttling"}},
	{"transient-denied", []string{"PermissionDenied"}},
	{"stuck-body", []string{"Ranges"}},
	{"ignores-cancel", []string{"Cancel"}},
	{"mixes-versions", []string{"VersionChange"}},
}

// The suite fails a source that breaks the contract: each mutation of memsrc breaks one
// rule, and the suite, run against it in a child process, must fail the subtests that
// check that rule (and pass against memsrc unbroken).
func TestSuiteCatchesBrokenSources(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("this is the child process")
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBrokenSource$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+m.name)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the suite did not finish within its time:\n%s", out)
			}
			if m.mustFail == nil {
				if err != nil {
					t.Fatalf("the suite failed memsrc unbroken: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Errorf("the suite passed a source broken by %q", m.name)
			}
			for _, sub := range m.mustFail {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenSource/"+sub+" ") {
					t.Errorf("mutation %q: subtest %s did not fail", m.name, sub)
				}
			}
			if t.Failed() {
				t.Logf("child output:\n%s", out)
			}
		})
	}
}

// The suite lets an origin settle after every change before it reads: against a fixture
// whose Puts and Deletes show only once Settle is called, as in an eventually consistent
// store, it passes.
func TestSuiteSettles(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
		mem := memsrc.New()
		var mu sync.Mutex
		var pending []func()
		later := func(change func()) {
			mu.Lock()
			defer mu.Unlock()
			pending = append(pending, change)
		}
		return &sourcetest.Fixture{
			Source: mem,
			Put: func(_ testing.TB, p string, data []byte) {
				later(func() { mem.Add(p, data) })
			},
			Delete: func(_ testing.TB, p string) { later(func() { mem.Remove(p) }) },
			Settle: func(testing.TB) {
				mu.Lock()
				defer mu.Unlock()
				for _, change := range pending {
					change()
				}
				pending = nil
			},
			NoDenied:   "memsrc has no access control",
			NoThrottle: "memsrc does not throttle",
		}
	})
}

// TestBrokenSource runs the suite against memsrc broken by the mutation brokenEnv
// names; only TestSuiteCatchesBrokenSources runs it.
func TestBrokenSource(t *testing.T) {
	mutation := os.Getenv(brokenEnv)
	if mutation == "" {
		t.Skip("run by TestSuiteCatchesBrokenSources")
	}
	sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
		mem := memsrc.New()
		return &sourcetest.Fixture{
			Source: broken{Source: mem, mutation: mutation},
			Put:    func(_ testing.TB, p string, data []byte) { mem.Add(p, data) },
			Delete: func(_ testing.TB, p string) { mem.Remove(p) },
			Denied: func(testing.TB) source.Source {
				return broken{Source: refusing{}, mutation: mutation}
			},
			Throttled: func(_ testing.TB, n int) source.Source {
				plan := memsrc.FaultPlan{}
				for i := 1; i <= n; i++ {
					plan.Faults = append(plan.Faults, memsrc.Fault{N: i, Kind: memsrc.FailOpen})
				}
				return broken{Source: memsrc.WithFaults(mem, plan), mutation: mutation}
			},
		}
	})
}

// broken is a source that breaks one rule of the contract.
type broken struct {
	source.Source
	mutation string
}

// ctx is the context the mutation passes on.
func (b broken) ctx(ctx context.Context) context.Context {
	if b.mutation == "ignores-cancel" {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (b broken) Stat(ctx context.Context, p string) (source.Entry, error) {
	ent, err := b.Source.Stat(b.ctx(ctx), p)
	if b.mutation == "unstable-version" && err == nil && !ent.IsDir {
		ent.Version.ModTime = time.Now() // a new "version" on every call
		ent.Version.ETag = ""
	}
	return ent, b.wrap(err)
}

func (b broken) List(ctx context.Context, p string) ([]source.Entry, error) {
	ents, err := b.Source.List(b.ctx(ctx), p)
	switch b.mutation {
	case "short-listing": // one page of an object store's listing, and no more
		if len(ents) > 1000 {
			ents = ents[:1000]
		}
	case "flat-listing": // directories left out
		var files []source.Entry
		for _, e := range ents {
			if !e.IsDir {
				files = append(files, e)
			}
		}
		ents = files
	}
	return ents, b.wrap(err)
}

func (b broken) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	switch b.mutation {
	case "shifted-ranges":
		r.Off++
	case "ignores-version":
		want = source.AnyVersion
	case "past-end-error":
		if ent, err := b.Source.Stat(ctx, p); err == nil && r.Off >= ent.Version.Size && r.Len != 0 {
			return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: errors.New("range not satisfiable")}
		}
	}
	body, err := b.Source.OpenRange(b.ctx(ctx), p, r, want)
	if err != nil {
		return nil, b.wrap(err)
	}
	switch b.mutation {
	case "mixes-versions":
		return &reopening{Body: body, src: b.Source, ctx: ctx, path: p, r: r}, nil
	case "eof-as-error":
		return eofAsError{body}, nil
	case "stuck-body":
		return &stuckAtEnd{Body: body}, nil
	}
	return body, nil
}

// wrap breaks the errors the mutation is about.
func (b broken) wrap(err error) error {
	if err == nil {
		return nil
	}
	var pe *source.PathError
	isPE := errors.As(err, &pe)
	switch {
	case b.mutation == "transient-not-found" && errors.Is(err, source.ErrNotFound) && isPE:
		return &source.PathError{Op: pe.Op, Path: pe.Path, Off: pe.Off, Err: errors.New(err.Error())}
	case b.mutation == "bare-errors" && isPE:
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	case b.mutation == "permanent-throttle" && errors.Is(err, memsrc.ErrInjected):
		return fmt.Errorf("%w: %w", source.ErrChanged, err)
	case b.mutation == "transient-denied" && errors.Is(err, source.ErrPermission) && isPE:
		return &source.PathError{Op: pe.Op, Path: pe.Path, Off: pe.Off, Err: errors.New("access denied")}
	}
	return err
}

// eofAsError ends every body with io.ErrUnexpectedEOF instead of io.EOF.
type eofAsError struct{ source.Body }

func (b eofAsError) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// stuckAtEnd returns (0, nil) forever instead of io.EOF.
type stuckAtEnd struct{ source.Body }

func (b *stuckAtEnd) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// reopening serves its first Read from the body it opened, and every later Read from a
// range opened anew at whatever version the origin has then: as a backend that
// reconnects mid-body without a condition would.
type reopening struct {
	source.Body
	src  source.Source
	ctx  context.Context
	path string
	r    source.Range // the rest of the range, after the bytes read
	read bool         // the first Read is done
}

func (b *reopening) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		n, err := b.Body.Read(p)
		b.advance(n)
		return n, err
	}
	if b.r.Len == 0 {
		return 0, io.EOF
	}
	body, err := b.src.OpenRange(b.ctx, b.path, b.r, source.AnyVersion)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := body.Read(p)
	b.advance(n)
	return n, err
}

func (b *reopening) advance(n int) {
	b.r.Off += int64(n)
	if b.r.Len > 0 {
		b.r.Len -= int64(n)
	}
}

// refusing is an origin that refuses every request, as one refusing this client's
// credentials does.
type refusing struct{}

func (refusing) deny(op, p string, off int64) error {
	return &source.PathError{Op: op, Path: p, Off: off, Err: fmt.Errorf("%w (HTTP 403)", source.ErrPermission)}
}

func (r refusing) Stat(_ context.Context, p string) (source.Entry, error) {
	return source.Entry{}, r.deny("stat", p, -1)
}

func (r refusing) List(_ context.Context, p string) ([]source.Entry, error) {
	return nil, r.deny("list", p, -1)
}

func (r refusing) OpenRange(_ context.Context, p string, rg source.Range, _ source.Version) (source.Body, error) {
	return nil, r.deny("open", p, rg.Off)
}

func (refusing) String() string { return "refusing:" }

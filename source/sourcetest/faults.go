package sourcetest

import (
	"context"
	"fmt"
	"io"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// Missing: paths that name nothing fail permanently with ErrNotFound and the path, for
// Stat, List and OpenRange alike, with or without a wanted version; a directory is not a
// file OpenRange can open.
func testMissing(e *env) {
	e.put("here/file.bin", seedOf("here/file.bin", 0), 100)
	e.settle()
	some := source.Version{Size: 100, ModTime: dirEpoch, ETag: `"sourcetest"`}
	for _, p := range []string{"missing.bin", "here/missing.bin", "no/such/dir/x.bin", "here/file.bin.old"} {
		_, err := e.src.Stat(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("Stat(%q)", p), err, p, true, source.ErrNotFound)
		e.openErr("missing, any version", p, source.Range{Off: 0, Len: 10}, source.AnyVersion, source.ErrNotFound)
		e.openErr("missing, open-ended", p, source.Range{Off: 0, Len: -1}, source.AnyVersion, source.ErrNotFound)
		e.openErr("missing, a wanted version", p, source.Range{Off: 0, Len: 10}, some, source.ErrNotFound, source.ErrChanged)
	}
	for _, p := range []string{"missing", "here/missing", "no/such/dir"} {
		_, err := e.src.List(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("List(%q)", p), err, p, true, source.ErrNotFound)
	}
	// A directory has no bytes to serve: there is no file at its path.
	for _, p := range []string{"here", ""} {
		e.openErr("a directory", p, source.Range{Off: 0, Len: 10}, source.AnyVersion, source.ErrNotFound)
	}
}

// PermissionDenied: an origin that refuses this client makes Stat, List and OpenRange
// fail permanently with ErrPermission and the path.
func testDenied(e *env) {
	if e.f.Denied == nil {
		notApplicable(e.t, e.f.NoDenied)
		return
	}
	e.put("top.bin", seedOf("top.bin", 0), 1000)
	e.put("dir/f.bin", seedOf("dir/f.bin", 0), 1000)
	e.settle()
	src := e.f.Denied(e.t)
	for _, p := range []string{"top.bin", "dir/f.bin"} {
		_, err := src.Stat(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("denied: Stat(%q)", p), err, p, true, source.ErrPermission)
		b, err := src.OpenRange(e.ctx, p, source.Range{Off: 0, Len: 100}, source.AnyVersion)
		if b != nil {
			b.Close()
			e.t.Errorf("denied: OpenRange(%q) served a body", p)
		}
		checkErr(e.t, fmt.Sprintf("denied: OpenRange(%q)", p), err, p, true, source.ErrPermission)
	}
	for _, p := range []string{"", "dir"} {
		_, err := src.List(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("denied: List(%q)", p), err, p, true, source.ErrPermission)
	}
}

// throttledAnswers is how many requests the throttled origin answers with throttling:
// two, so an SDK with the usual budget of three attempts per call (the AWS SDK's
// default) rides them out.
const throttledAnswers = 2

// Throttling: an origin that throttles the first requests. Where the backend's SDK
// retries (ThrottleMustSucceed) every call succeeds; otherwise a call may fail, but only
// with a transient error naming the path (the fetcher retries those), and succeeds when
// tried again once the origin stops throttling. Either way the bytes are right.
func testThrottling(e *env) {
	if e.f.Throttled == nil {
		notApplicable(e.t, e.f.NoThrottle)
		return
	}
	const p = "t/throttled.bin"
	const size = 300<<10 + 5
	seed := seedOf(p, 0)
	e.put(p, seed, size)
	e.settle()
	src := e.f.Throttled(e.t, throttledAnswers)
	readRange := func(r source.Range) func(ctx context.Context) (error, error) {
		return func(ctx context.Context) (callErr, wrong error) {
			b, err := src.OpenRange(ctx, p, r, source.AnyVersion)
			if err != nil {
				return err, nil
			}
			defer b.Close()
			got, err := readBody(b, 64<<10, expectLen(r, size))
			switch {
			case err != io.EOF:
				return nil, fmt.Errorf("OpenRange(%q, %d, %d): body ended with %v after %d bytes", p, r.Off, r.Len, err, len(got))
			case int64(len(got)) != expectLen(r, size):
				return nil, fmt.Errorf("OpenRange(%q, %d, %d): %d bytes, want %d", p, r.Off, r.Len, len(got), expectLen(r, size))
			}
			return nil, pattern.Verify(seed, got, r.Off)
		}
	}
	ops := []struct {
		name, path string
		do         func(ctx context.Context) (callErr, wrong error)
	}{
		{"List(\"t\")", "t", func(ctx context.Context) (error, error) {
			ents, err := src.List(ctx, "t")
			if err != nil {
				return err, nil
			}
			if len(ents) != 1 || ents[0].Name != "throttled.bin" {
				return nil, fmt.Errorf("List(\"t\") = %v, want throttled.bin alone", ents)
			}
			return nil, nil
		}},
		{"Stat", p, func(ctx context.Context) (error, error) {
			ent, err := src.Stat(ctx, p)
			if err != nil {
				return err, nil
			}
			if ent.Version.Size != size {
				return nil, fmt.Errorf("Stat(%q): size %d, want %d", p, ent.Version.Size, size)
			}
			return nil, nil
		}},
		{"OpenRange whole", p, readRange(source.Range{Off: 0, Len: -1})},
		{"OpenRange middle", p, readRange(source.Range{Off: 1000, Len: 50_000})},
	}
	failures := 0
	for _, op := range ops {
		for {
			callErr, wrong := op.do(e.ctx)
			if wrong != nil {
				e.t.Errorf("throttled: %s: %v", op.name, wrong)
			}
			if callErr == nil {
				break
			}
			failures++
			if e.f.ThrottleMustSucceed {
				e.t.Errorf("throttled: %s failed (the backend must ride out %d throttled answers): %v", op.name, throttledAnswers, callErr)
				break
			}
			checkErr(e.t, "throttled: "+op.name, callErr, op.path, false)
			if failures > throttledAnswers {
				e.t.Errorf("throttled: %s still failing after %d failed calls, when the origin throttles %d requests: %v",
					op.name, failures, throttledAnswers, callErr)
				break
			}
			e.t.Logf("throttled: %s: transient error, as allowed: %v", op.name, callErr)
		}
	}
	if !e.f.ThrottleMustSucceed && failures == 0 {
		e.t.Errorf("throttled: no call failed, when the origin answered %d requests with throttling and the backend does not retry: does the fixture's Throttled throttle?", throttledAnswers)
	}
}

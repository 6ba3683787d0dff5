package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// Cancel: calls made with a context that is done fail with an error wrapping its
// context.Canceled (permanent: the caller gave up) and the path; a body whose OpenRange
// context ends while it is being read fails its next Reads promptly, having served only
// right bytes.
func testCancel(e *env) {
	f := e.putRangeFile("c/cancel.bin", rangeSize)
	done, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := e.src.Stat(done, f.path)
	checkErr(e.t, "Stat with a cancelled context", err, f.path, true, context.Canceled)
	_, err = e.src.List(done, "c")
	checkErr(e.t, "List with a cancelled context", err, "c", true, context.Canceled)
	b, err := e.src.OpenRange(done, f.path, source.Range{Off: 0, Len: -1}, f.version)
	if b != nil {
		b.Close()
		e.t.Errorf("OpenRange with a cancelled context served a body")
	}
	checkErr(e.t, "OpenRange with a cancelled context", err, f.path, true, context.Canceled)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	b, err = e.src.OpenRange(ctx, f.path, source.Range{Off: 0, Len: -1}, f.version)
	if err != nil {
		e.t.Fatalf("OpenRange(%q): %v", f.path, err)
	}
	defer b.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(b, head); err != nil {
		e.t.Fatalf("reading %q: %v", f.path, err)
	}
	cancel()
	result := make(chan error, 1)
	go func() {
		got, err := readBody(b, 4096, rangeSize)
		got = append(head, got...)
		switch {
		case err == io.EOF:
			err = fmt.Errorf("the body read on to its end (%d bytes) after its context was cancelled", len(got))
		case err == nil:
			err = errors.New("no error")
		default:
			err = errors.Join(pattern.Verify(f.seed, got, 0), checkCancelled(err, f.path))
		}
		result <- err
	}()
	select {
	case err := <-result:
		if err != nil {
			e.t.Errorf("reading after the OpenRange context was cancelled: %v", err)
		}
	case <-time.After(closeWait):
		e.t.Fatalf("Read still running %v after the OpenRange context was cancelled", closeWait)
	}
}

// checkCancelled checks that a Read error after cancellation names the path. It need not
// wrap context.Canceled: the transport may report the connection it closed instead.
func checkCancelled(err error, path string) error {
	var pe *source.PathError
	if !errors.As(err, &pe) || pe.Path != path {
		return fmt.Errorf("error %q does not carry a PathError for %q", err, path)
	}
	return nil
}

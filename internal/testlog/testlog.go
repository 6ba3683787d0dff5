// Package testlog gives tests a logger whose lines go to the test's log, so they show
// with the test that wrote them (and only when it fails, or with -v).
package testlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// New returns a logger writing to t.Log.
func New(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(writer{t}, nil)) }

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Buffer collects what a logger or a process writes, for a test to read while it is
// still being written. Safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

package vfs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// fetch.Options.IOTimeout "bounds how long a read waits while the origin makes no
// progress": a read of a block the origin keeps refusing fails after IOTimeout, not
// after the retry backoff has run on past it.
func TestReadFailsWithinIOTimeout(t *testing.T) {
	const (
		ioTimeout = time.Second
		// slack covers scheduling under -race on a loaded machine, and is well below
		// the backoff step (RetryMin doubling) that could carry a read past the bound.
		slack = 300 * time.Millisecond
	)
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, 8<<20)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Fetch.IOTimeout = ioTimeout
	fsys, err := vfs.New(memsrc.WithFaults(mem, memsrc.FaultPlan{FailRate: 1}), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fsys.Close()
		settleDir(t, opts.Cache.Dir)
	})
	f := open(t, fsys, "a.bin")
	start := time.Now()
	_, err = f.ReadAt(make([]byte, 64<<10), 4<<20)
	took := time.Since(start)
	if !errors.Is(err, memsrc.ErrInjected) {
		t.Fatalf("read with every range refused: %v, want the origin's error", err)
	}
	if took < ioTimeout || took > ioTimeout+slack {
		t.Errorf("read with every range refused failed after %v, want IOTimeout %v (+%v slack)",
			took.Round(time.Millisecond), ioTimeout, slack)
	}
}

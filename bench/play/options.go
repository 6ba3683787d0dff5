package play

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Options describe the player. Zero fields take the defaults of DefaultOptions.
type Options struct {
	// Rate is the bitrate in bytes per second: how fast playback consumes the file.
	// Default 3 MB/s (24 Mbit/s, a high-bitrate 1080p stream).
	Rate int64

	// Chunk is the size of one read in bytes, what a player's demuxer asks for at a time.
	// Default 256 KiB.
	Chunk int64

	// Start is the offset playback starts at, in bytes (a seek before pressing play).
	// Zero means the beginning of the file.
	Start int64

	// Limit is how many bytes to play from Start. Zero means to the end of the file.
	Limit int64

	// FreezeThreshold is how late a read may complete after its data was due before it
	// counts as a freeze: a frame shown 10 ms late is not seen, one shown 40 ms late is
	// a dropped frame. Default 10 ms.
	FreezeThreshold time.Duration

	// Ahead is how many chunks the player keeps buffered ahead of the playhead: the read
	// for chunk i is issued when chunk i-Ahead is due, never earlier. Players buffer
	// seconds; one chunk is the harshest test of a filesystem's own read-ahead. Zero
	// means the default, 1.
	Ahead int

	// Clock is where time comes from. Nil means the real clock, which is also what tests
	// use inside a testing/synctest bubble.
	Clock Clock
}

// Default option values; see Options.
const (
	DefaultRate            = 3_000_000
	DefaultChunk           = 256 << 10
	DefaultFreezeThreshold = 10 * time.Millisecond
	DefaultAhead           = 1
)

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{
		Rate:            DefaultRate,
		Chunk:           DefaultChunk,
		FreezeThreshold: DefaultFreezeThreshold,
		Ahead:           DefaultAhead,
		Clock:           RealClock(),
	}
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Rate == 0 {
		o.Rate = d.Rate
	}
	if o.Chunk == 0 {
		o.Chunk = d.Chunk
	}
	if o.FreezeThreshold == 0 {
		o.FreezeThreshold = d.FreezeThreshold
	}
	if o.Ahead == 0 {
		o.Ahead = d.Ahead
	}
	if o.Clock == nil {
		o.Clock = d.Clock
	}
	return o
}

// Validate reports options no player could use. Zero fields are valid (they mean the
// default).
func (o Options) Validate() error {
	var errs []error
	if o.Rate < 0 {
		errs = append(errs, fmt.Errorf("play: Rate %d B/s is negative", o.Rate))
	}
	if o.Chunk < 0 {
		errs = append(errs, fmt.Errorf("play: Chunk %d is negative", o.Chunk))
	}
	if o.Start < 0 {
		errs = append(errs, fmt.Errorf("play: Start %d is negative", o.Start))
	}
	if o.Limit < 0 {
		errs = append(errs, fmt.Errorf("play: Limit %d is negative", o.Limit))
	}
	if o.FreezeThreshold < 0 {
		errs = append(errs, fmt.Errorf("play: FreezeThreshold %v is negative", o.FreezeThreshold))
	}
	if o.Ahead < 0 {
		errs = append(errs, fmt.Errorf("play: Ahead %d is negative", o.Ahead))
	}
	return errors.Join(errs...)
}

// Clock is the player's time source.
type Clock interface {
	Now() time.Time
	// Sleep waits for d (returning at once if d <= 0) or until ctx is done, and then
	// returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock returns the clock of package time.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package scenario

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/playhead/playhead/internal/units"
	"github.com/playhead/playhead/origin"
)

// Env is what a scenario gets from the runner: a way to mount the system under test.
// It is owned here because scenarios are its only users.
type Env interface {
	// Mount starts the system under test on the trial's cache directory (the same one for
	// every Mount of a trial, fresh for each trial) and returns the origin's files as it
	// serves them (paths are origin paths), once the mount answers, its connections are
	// warm and the page cache is dropped. The runner resets the origin's counters just
	// before Mount returns, so they count what the scenario does after its last Mount.
	// Files opened from it implement io.ReaderAt (*os.File does).
	Mount(ctx context.Context) (fs.FS, error)
	// Unmount stops the mount. The runner unmounts whatever is still mounted when Run
	// returns; a scenario calls it only to mount again (rewatch).
	Unmount() error
}

// Case is one row of the report: a scenario at one setting (play has one per bitrate).
type Case struct {
	Scenario string // the scenario's name, as given to --scenario
	Name     string // the row label, e.g. "play 3MB/s"
	// Files are the generated files the case reads, by origin path; the runner serves
	// them. Cases of one scenario share their files.
	Files map[string]origin.File
	// ReadyFile is an origin path whose stat proves the mount answers.
	ReadyFile string
	// Run runs one trial and returns its figures. It must read only Files, and check
	// every byte it reads (a mismatch is a *MismatchError).
	Run func(ctx context.Context, env Env) (Figures, error)
	// Unavailable, when set, says why the case cannot run here (a player it needs is
	// missing); Files and Run are then unset, and the report says so.
	Unavailable string
}

// Sizes are the knobs of every scenario: Full is the benchmark, Quick a smoke run about
// ten times smaller, and tests shrink them further.
type Sizes struct {
	PlayFile  int64   // play: file size, bytes
	PlayRates []int64 // play: bitrates, bytes/s, one case each

	SeekFile int64 // seek: file size
	Seeks    int   // seek: how many seeks
	SeekPlay int64 // seek: bytes played after each seek
	SeekRate int64 // seek: bitrate
	SeekSeed uint64

	ThumbFiles int   // thumbs: how many files
	ThumbFile  int64 // thumbs: size of each
	ThumbProbe int64 // thumbs: bytes read at the start and at the end

	BulkFile int64 // bulk: file size
	BulkRead int64 // bulk: bytes per read

	Streams    []StreamSet // streams: one case per set of players played at once
	StreamFile int64       // streams: size of each file

	ShuffledFile    int64 // shuffled: file size
	ShuffledRate    int64 // shuffled: total bitrate
	ShuffledThreads int   // shuffled: readers
	ShuffledPiece   int64 // shuffled: bytes per read
	ShuffledWindow  int   // shuffled: pieces per window, shuffled within it
	ShuffledSeed    uint64

	RewatchFile int64 // rewatch: bytes played each time (and the file size)
	RewatchRate int64 // rewatch: bitrate
	// RewatchPause is how long the first mount stays up after the first play, before it
	// is stopped: a viewer rewatches later, not the instant playback ends, and a system
	// may record what it cached lazily (rclone saves its VFS cache's downloaded ranges
	// about 5 s after a file is closed; stopped sooner, it fetches everything again).
	RewatchPause time.Duration

	Players PlayersConfig // players: the player commands and the media
}

// StreamSet is one case of the streams scenario: Players files played at once, each at
// Rate bytes/s. The benchmark's two are the shared-link cases of the real-links issue:
// eight players at 3 MB/s (24 of a 30 MB/s link) and four at 5 MB/s (20).
type StreamSet struct {
	Players int
	Rate    int64
}

// rewatchPause is Sizes.RewatchPause of the benchmark: longer than rclone's deferred
// save of its cache metadata (5 s), with a margin.
const rewatchPause = 7 * time.Second

// Full returns the benchmark's sizes, the ones its figures are quoted at.
func Full() Sizes {
	return Sizes{
		PlayFile:  200_000_000,
		PlayRates: []int64{3_000_000, 8_000_000, 20_000_000},

		SeekFile: 300_000_000, Seeks: 20, SeekPlay: 2_000_000, SeekRate: 3_000_000, SeekSeed: 1,

		ThumbFiles: 100, ThumbFile: 20_000_000, ThumbProbe: 64 << 10,

		BulkFile: 1 << 30, BulkRead: 1 << 20,

		Streams:    []StreamSet{{Players: 8, Rate: 3_000_000}, {Players: 4, Rate: 5_000_000}},
		StreamFile: 200_000_000,

		ShuffledFile: 200_000_000, ShuffledRate: 20_000_000, ShuffledThreads: 4,
		ShuffledPiece: 128 << 10, ShuffledWindow: 8, ShuffledSeed: 1,

		RewatchFile: 50_000_000, RewatchRate: 3_000_000, RewatchPause: rewatchPause,

		Players: PlayersConfig{Media: FullMedia()},
	}
}

// Quick returns sizes about ten times smaller than Full, for a smoke run of a minute or
// two. Rates, read sizes and the probe size stay: they define the workload, not its length.
// The players' media stays too: it is generated once and cached, and a shorter clip
// could not be sought to 45 s.
func Quick() Sizes {
	s := Full()
	s.PlayFile = 20_000_000
	s.SeekFile, s.Seeks = 30_000_000, 4
	s.ThumbFiles = 10
	s.BulkFile = 100_000_000
	s.StreamFile = 20_000_000
	s.ShuffledFile = 20_000_000
	s.RewatchFile = 5_000_000
	return s
}

// Names are the scenarios in the order they run.
var Names = []string{"play", "seek", "thumbs", "bulk", "streams", "shuffled", "rewatch", "players"}

// Cases returns the cases of the named scenarios (all of them for none), in the order of
// Names, or an error naming an unknown scenario. players generates its media with ffmpeg
// the first time (about 10 s; see PrepareMedia); without ffmpeg its cases are Unavailable.
func Cases(names []string, s Sizes) ([]Case, error) {
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !slices.Contains(Names, n) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(Names, ", "))
		}
		want[n] = true
	}
	var cases []Case
	for _, n := range Names {
		if len(want) > 0 && !want[n] {
			continue
		}
		switch n {
		case "play":
			cases = append(cases, playCases(s)...)
		case "seek":
			cases = append(cases, seekCase(s))
		case "thumbs":
			cases = append(cases, thumbsCase(s))
		case "bulk":
			cases = append(cases, bulkCase(s))
		case "streams":
			for _, set := range s.Streams {
				cases = append(cases, streamsCase(s.StreamFile, set))
			}
		case "shuffled":
			cases = append(cases, shuffledCase(s))
		case "rewatch":
			cases = append(cases, rewatchCase(s))
		case "players":
			cases = append(cases, playersCases(s.Players)...)
		}
	}
	return cases, nil
}

// newFile returns the generated file at p: its seed is a hash of the path, so every file
// of every scenario has different bytes (a block served from the wrong file is caught).
func newFile(p string, size int64) origin.File {
	h := fnv.New64a()
	h.Write([]byte(p))
	return origin.File{Seed: h.Sum64(), Size: size}
}

// mediaName is the origin path of the i-th file of a scenario.
func mediaName(scenario string, i int) string {
	return path.Join(scenario, fmt.Sprintf("%s-%03d.mkv", scenario, i))
}

// rateLabel prints a bitrate the way the spec names it ("3MB/s").
func rateLabel(r int64) string {
	if r%1_000_000 == 0 {
		return fmt.Sprintf("%dMB/s", r/1_000_000)
	}
	return units.FormatRate(float64(r))
}

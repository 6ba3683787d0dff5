package scenario

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/playhead/playhead/origin"
)

// The players scenario runs real players on the mount: FFmpeg decodes the first frame
// of an MP4 whose index is at its end, then again from 30 s and 45 s on the same mount
// (its caches cold only at the trial's start, as a viewer who skips ahead); the same for
// the Matroska copy, whose cues are at its end; ffprobe scans a folder of MP4s as a
// media server's library scan does; ffprobe scans the same folder remuxed to Matroska,
// as a library of MKVs (whose first cluster ffprobe reads past the first half MiB); and
// ffprobe scans a folder of two-hour MP4s whose moov is at the end, as a folder of films
// (whose moov ffprobe reads whole: a few MB at the end of each file). The files are real
// media (see PrepareMedia), served from disk by the origin.
//
// A player's bytes cannot be checked against a pattern. What it prints is checked
// instead: ffmpeg the MD5 of the decoded frame (-f framemd5, where the command
// has -f null: the same demuxing and decoding, plus a hash of one frame), ffprobe the
// container and streams. Each must equal the same command's output on the file on local
// disk, computed when the cases are made; a difference is a *MismatchError.
//
// The figures: the player's wall time (time to first frame, with its own start-up of
// about 0.1 s, which the local-disk column shows), the bytes it read (rchar of
// /proc/PID/io less that of `PLAYER -version`: its libraries and /proc reads, the same
// in both within a few hundred bytes), and the origin's counters, over the whole trial and per
// run when the Env can read them mid-trial (OriginCounter). A run's origin bytes are the
// counters' growth from its start to its exit: read-ahead an earlier run started that
// arrives meanwhile counts for it, and read-ahead still arriving after the last run
// counts only in the trial's total.

// PlayersConfig configures the players scenario.
type PlayersConfig struct {
	FFmpeg   string // the ffmpeg command; empty means "ffmpeg" from PATH
	FFprobe  string // the ffprobe command; empty means "ffprobe" from PATH
	MediaDir string // the cache of generated media; empty means defaultMediaDir
	Media    MediaSpec
}

// DirEnv is implemented by an Env whose mount is a directory of this machine, so an
// external program can open its files by path (the runner's): MountDir is the live
// mount's directory, "" when the system is not a directory (an HTTP ceiling).
type DirEnv interface {
	MountDir() string
}

// OriginCounter is implemented by an Env that can read the origin's counters during a
// trial (the runner's): body bytes sent and requests answered since the last Mount.
type OriginCounter interface {
	OriginCounts() (bytes, requests int64, err error)
}

// playersDir is the scenario's directory on the origin.
const playersDir = "players"

// frameSeeks are where ffmpeg decodes its first frame, one run each, in order (-ss,
// seconds; 0 means no -ss): the start, then two jumps ahead, as the issue asks.
var frameSeeks = []int{0, 30, 45}

// mediaTimeout bounds generating the media and the reference runs.
const mediaTimeout = 10 * time.Minute

// defaultMediaDir is where generated media is kept between runs, outside the tree.
func defaultMediaDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "playhead", "media")
}

func (c PlayersConfig) withDefaults() PlayersConfig {
	if c.FFmpeg == "" {
		c.FFmpeg = "ffmpeg"
	}
	if c.FFprobe == "" {
		c.FFprobe = "ffprobe"
	}
	if c.MediaDir == "" {
		c.MediaDir = defaultMediaDir()
	}
	return c
}

// Case names of the players scenario.
const (
	caseFrameMP4 = "players ffmpeg mp4"
	caseFrameMKV = "players ffmpeg mkv"
)

func scanName(n int) string     { return fmt.Sprintf("players ffprobe %d files", n) }
func scanMKVName(n int) string  { return fmt.Sprintf("players ffprobe %d mkv files", n) }
func scanFilmName(n int) string { return fmt.Sprintf("players ffprobe %d films", n) }

// playersCases generates (or finds) the media and makes the cases; when it cannot, the
// cases are there with the reason they cannot run.
func playersCases(cfg PlayersConfig) []Case {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), mediaTimeout)
	defer cancel()
	m, err := PrepareMedia(ctx, cfg.FFmpeg, cfg.MediaDir, cfg.Media)
	if err == nil {
		var cases []Case
		if cases, err = mediaCases(ctx, cfg, m); err == nil {
			return cases
		}
	}
	why := fmt.Sprintf("%v (make bench-deps installs ffmpeg)", err)
	names := []string{caseFrameMP4, caseFrameMKV, scanName(cfg.Media.LibraryFiles), scanMKVName(cfg.Media.LibraryFiles)}
	if cfg.Media.FilmFiles > 0 {
		names = append(names, scanFilmName(cfg.Media.FilmFiles))
	}
	var cases []Case
	for _, n := range names {
		cases = append(cases, Case{Scenario: "players", Name: n, Unavailable: why})
	}
	return cases
}

// playerCmd is one player run of a case and what it must print.
type playerCmd struct {
	argv     []string // file names relative to the scenario's directory
	want     []byte   // its output on local disk
	baseline int64    // rchar of the player's start-up
}

// mediaCases makes the cases for m: origin files, commands, and their reference output
// on local disk.
func mediaCases(ctx context.Context, cfg PlayersConfig, m Media) ([]Case, error) {
	files := map[string]origin.File{}
	for _, rel := range slices.Concat([]string{m.MP4, m.MKV}, m.Library, m.LibraryMKV, m.Films) {
		abs := filepath.Join(m.Dir, filepath.FromSlash(rel))
		st, err := os.Stat(abs)
		if err != nil {
			return nil, err
		}
		p := path.Join(playersDir, rel)
		f := newFile(p, st.Size())
		f.Path = abs
		files[p] = f
	}
	baselines := map[string]int64{}
	for _, player := range []string{cfg.FFmpeg, cfg.FFprobe} {
		r, err := runPlayer(ctx, m.Dir, []string{player, "-version"})
		if err != nil {
			return nil, err
		}
		baselines[player] = max(r.Read, 0)
	}
	reference := func(argv []string) (playerCmd, error) {
		r, err := runPlayer(ctx, m.Dir, argv)
		if err != nil {
			return playerCmd{}, fmt.Errorf("on local disk: %w", err)
		}
		return playerCmd{argv: argv, want: r.Output, baseline: baselines[argv[0]]}, nil
	}
	var cases []Case
	for _, c := range []struct{ name, file string }{{caseFrameMP4, m.MP4}, {caseFrameMKV, m.MKV}} {
		var cmds []playerCmd
		for _, ss := range frameSeeks {
			pc, err := reference(frameArgv(cfg.FFmpeg, ss, c.file))
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, pc)
		}
		cases = append(cases, frameCase(c.name, path.Join(playersDir, c.file), files, cmds))
	}
	type library struct {
		name  string
		files []string
	}
	libs := []library{{scanName(len(m.Library)), m.Library}, {scanMKVName(len(m.LibraryMKV)), m.LibraryMKV}}
	// A spec without films has no film case: scanCase needs a file.
	if len(m.Films) > 0 {
		libs = append(libs, library{scanFilmName(len(m.Films)), m.Films})
	}
	for _, lib := range libs {
		var probes []playerCmd
		for _, f := range lib.files {
			pc, err := reference([]string{cfg.FFprobe, "-v", "error", "-show_format", "-show_streams", f})
			if err != nil {
				return nil, err
			}
			probes = append(probes, pc)
		}
		cases = append(cases, scanCase(lib.name, files, lib.files, probes))
	}
	return cases, nil
}

// frameArgv is ffmpeg decoding one frame of file from ss seconds (0: from the start).
func frameArgv(ffmpeg string, ss int, file string) []string {
	argv := []string{ffmpeg, "-nostdin", "-v", "error"}
	if ss > 0 {
		argv = append(argv, "-ss", strconv.Itoa(ss))
	}
	return append(argv, "-i", file, "-frames:v", "1", "-f", "framemd5", "-")
}

// playerResult is one run of a case: the player's, and the origin's growth over it
// (OriginBytes -1 when the Env cannot count mid-trial).
type playerResult struct {
	playerRun
	OriginBytes int64
}

// mountPlayers mounts the system and returns the scenario's directory in it, once the
// players of cmds have started once away from the mount: the runner drops the page
// cache after the mount is ready, and with it the players' own libraries (ffmpeg loads
// about 200; reading them from disk took 0.3 s), which a media server running them all
// day has in memory and which are no part of the system under test.
func mountPlayers(ctx context.Context, env Env, cmds []playerCmd) (string, error) {
	if _, err := env.Mount(ctx); err != nil {
		return "", err
	}
	d, ok := env.(DirEnv)
	if !ok || d.MountDir() == "" {
		return "", fmt.Errorf("players: the system under test is not a directory a player can open")
	}
	warm := map[string]bool{}
	for _, pc := range cmds {
		if player := pc.argv[0]; !warm[player] {
			warm[player] = true
			if _, err := runPlayer(ctx, os.TempDir(), []string{player, "-version"}); err != nil {
				return "", err
			}
		}
	}
	return filepath.Join(d.MountDir(), playersDir), nil
}

// runChecked runs pc in dir, checks its output, and counts the origin's bytes over it
// when counter is not nil (reading nginx's or MinIO's counters waits for them to settle,
// a few tenths of a second, so only runs whose bytes are reported count).
func runChecked(ctx context.Context, counter OriginCounter, dir string, pc playerCmd) (playerResult, error) {
	before := int64(-1)
	if counter != nil {
		if b, _, err := counter.OriginCounts(); err == nil {
			before = b
		}
	}
	r, err := runPlayer(ctx, dir, pc.argv)
	if err != nil {
		return playerResult{}, err
	}
	if r.Read >= 0 {
		r.Read = max(r.Read-pc.baseline, 0)
	}
	res := playerResult{playerRun: r, OriginBytes: -1}
	if before >= 0 {
		if b, _, err := counter.OriginCounts(); err == nil {
			res.OriginBytes = b - before
		}
	}
	if !bytes.Equal(r.Output, pc.want) {
		file := pc.argv[len(pc.argv)-1]
		if file == "-" {
			file = pc.argv[slices.Index(pc.argv, "-i")+1]
		}
		return res, &MismatchError{Path: path.Join(playersDir, file),
			Err: fmt.Errorf("%v printed %q, on local disk %q", pc.argv, firstDiff(r.Output, pc.want), firstDiff(pc.want, r.Output))}
	}
	return res, nil
}

// firstDiff is the first line of a that b does not have at the same place.
func firstDiff(a, b []byte) []byte {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i, l := range al {
		if i >= len(bl) || !bytes.Equal(l, bl[i]) {
			return l
		}
	}
	return nil
}

// totalRead sums the runs' reads, or -1 when one is unknown.
func totalRead(runs []playerResult) float64 {
	var n int64
	for _, r := range runs {
		if r.Read < 0 {
			return -1
		}
		n += r.Read
	}
	return float64(n)
}

// frameCase is ffmpeg decoding the first frame of p from each of frameSeeks in turn.
func frameCase(name, p string, files map[string]origin.File, cmds []playerCmd) Case {
	return Case{
		Scenario:  "players",
		Name:      name,
		Files:     files,
		ReadyFile: p,
		Run: func(ctx context.Context, env Env) (Figures, error) {
			dir, err := mountPlayers(ctx, env, cmds)
			if err != nil {
				return nil, err
			}
			counter, _ := env.(OriginCounter)
			var runs []playerResult
			var reads []Read
			start := time.Now()
			for _, pc := range cmds {
				r, err := runChecked(ctx, counter, dir, pc)
				if err != nil {
					return nil, err
				}
				runs = append(runs, r)
				reads = append(reads, Read{At: time.Since(start).Seconds(), Latency: r.Wall.Seconds()})
			}
			record(env, reads)
			f := Figures{FigStartup: runs[0].Wall.Seconds()}
			if n := totalRead(runs); n >= 0 {
				f[FigBytesRead] = n
			}
			keys := []struct{ wall, bytes, read string }{{"", FigFirstFrameBytes, FigFirstFrameRead},
				{FigFrameAt30, FigAt30Bytes, FigAt30Read}, {FigFrameAt45, FigAt45Bytes, FigAt45Read}}
			for i, k := range keys[:min(len(keys), len(runs))] {
				if k.wall != "" {
					f[k.wall] = runs[i].Wall.Seconds()
				}
				if runs[i].OriginBytes >= 0 {
					f[k.bytes] = float64(runs[i].OriginBytes)
				}
				if runs[i].Read >= 0 {
					f[k.read] = float64(runs[i].Read)
				}
			}
			return f, nil
		},
	}
}

// scanCase is a library scan: list the folder of library[0], which must hold library and
// nothing else, then ffprobe each file in name order.
func scanCase(name string, files map[string]origin.File, library []string, probes []playerCmd) Case {
	want := make([]string, len(library))
	for i, f := range library {
		want[i] = path.Base(f)
	}
	libDir := path.Join(playersDir, path.Dir(library[0]))
	return Case{
		Scenario:  "players",
		Name:      name,
		Files:     files,
		ReadyFile: path.Join(playersDir, library[0]),
		Run: func(ctx context.Context, env Env) (Figures, error) {
			dir, err := mountPlayers(ctx, env, probes)
			if err != nil {
				return nil, err
			}
			start := time.Now()
			entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(path.Dir(library[0]))))
			if err != nil {
				return nil, err
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, want) {
				return nil, &MismatchError{Path: libDir, Err: fmt.Errorf("listed %q, origin has %q", got, want)}
			}
			var runs []playerResult
			var walls []time.Duration
			var reads []Read
			for _, pc := range probes {
				r, err := runChecked(ctx, nil, dir, pc)
				if err != nil {
					return nil, err
				}
				runs = append(runs, r)
				walls = append(walls, r.Wall)
				reads = append(reads, Read{At: time.Since(start).Seconds(), Latency: r.Wall.Seconds()})
			}
			scan := time.Since(start)
			record(env, reads)
			f := Figures{
				FigStartup:     walls[0].Seconds(),
				FigFiles:       float64(len(probes)),
				FigProbeMedian: percentile(walls, 0.5).Seconds(),
				FigProbeMax:    percentile(walls, 1).Seconds(),
				FigScan:        scan.Seconds(),
			}
			if n := totalRead(runs); n >= 0 {
				f[FigBytesRead] = n
			}
			return f, nil
		},
	}
}

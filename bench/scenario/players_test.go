package scenario

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakePlayerEnv makes this test binary act as ffmpeg and ffprobe (fakePlayer) when it
// is run as a player.
const fakePlayerEnv = "PLAYHEAD_FAKE_PLAYER"

func TestMain(m *testing.M) {
	if os.Getenv(fakePlayerEnv) == "1" {
		os.Exit(fakePlayer(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeProbe is how many bytes the fake player reads at each place it reads.
const fakeProbe = 4 << 10

// fakePlayer reads a player's way, with fewer bytes: fakeProbe at the start and at the
// end of the file (the index), and for ffmpeg's -ss N at N/60 of the way in, then
// prints a hash of what it read, so wrong bytes change its output.
func fakePlayer(args []string) int {
	if slices.Contains(args, "-version") {
		fmt.Println("fake player")
		return 0
	}
	file := args[len(args)-1]
	ss := 0
	offsets := func(size int64) []int64 { return []int64{0, max(size-fakeProbe, 0)} }
	if i := slices.Index(args, "-i"); i >= 0 {
		file = args[i+1]
		if j := slices.Index(args, "-ss"); j >= 0 {
			ss, _ = strconv.Atoi(args[j+1])
		}
		base := offsets
		offsets = func(size int64) []int64 { return append(base(size), size*int64(ss)/60) }
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h := sha256.New()
	buf := make([]byte, fakeProbe)
	for _, off := range offsets(st.Size()) {
		n, _ := f.ReadAt(buf, off)
		h.Write(buf[:n])
	}
	fmt.Printf("file=%s ss=%d sum=%x\n", file, ss, h.Sum(nil))
	return 0
}

// rcharNoise is how far a run's rchar, less the player's start-up, may be from the bytes
// it read from its file: the Go runtime's and the race detector's reads of /proc vary
// by a few hundred bytes from run to run.
const rcharNoise = 1024

// fakeMedia writes small files with the layout of Media into a new directory.
func fakeMedia(t *testing.T, libraryFiles, films int) Media {
	t.Helper()
	m := Media{Dir: t.TempDir(), MP4: clipMP4, MKV: clipMKV}
	for i := range libraryFiles {
		m.Library = append(m.Library, fmt.Sprintf("%s/lib-%03d.mp4", libraryDir, i))
		m.LibraryMKV = append(m.LibraryMKV, fmt.Sprintf("%s/lib-%03d.mkv", libraryMKVDir, i))
	}
	for i := range films {
		m.Films = append(m.Films, fmt.Sprintf("%s/film-%03d.mp4", filmsDir, i))
	}
	for i, rel := range slices.Concat([]string{m.MP4, m.MKV}, m.Library, m.LibraryMKV, m.Films) {
		data := make([]byte, 256<<10)
		for j := 0; j < len(data); j += 8 {
			binary.LittleEndian.PutUint64(data[j:], uint64(i)<<32|uint64(j))
		}
		p := filepath.Join(m.Dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// dirEnv "mounts" a directory holding the scenario's directory, and counts origin
// bytes as a fixed step per call.
type dirEnv struct {
	root  string
	calls *int64
}

func (e dirEnv) Mount(context.Context) (fs.FS, error) { return os.DirFS(e.root), nil }
func (e dirEnv) Unmount() error                       { return nil }
func (e dirEnv) MountDir() string                     { return e.root }
func (e dirEnv) OriginCounts() (int64, int64, error) {
	*e.calls++
	return *e.calls * 1000, *e.calls, nil
}

// rootOf returns a directory whose players/ is a copy of m's files, changed by edit.
func rootOf(t *testing.T, m Media, edit func(dir string)) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, playersDir)
	if err := os.CopyFS(dir, os.DirFS(m.Dir)); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(dir)
	}
	return root
}

func fakeConfig(t *testing.T) PlayersConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakePlayerEnv, "1")
	// Under -race, a program sleeps 1 s at exit by default; the fake player runs often.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	return PlayersConfig{FFmpeg: exe, FFprobe: exe}
}

func TestPlayersFigures(t *testing.T) {
	cfg := fakeConfig(t)
	m := fakeMedia(t, 3, 3)
	cases, err := mediaCases(t.Context(), cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "players ffmpeg mp4,players ffmpeg mkv,players ffprobe 3 files,players ffprobe 3 mkv files,players ffprobe 3 films" {
		t.Fatalf("cases %s", got)
	}
	f := cases[0].Files["players/clip.mp4"]
	if f.Path != filepath.Join(m.Dir, "clip.mp4") || f.Size != 256<<10 || len(cases[0].Files) != 11 {
		t.Errorf("files %+v", cases[0].Files)
	}
	env := dirEnv{root: rootOf(t, m, nil), calls: new(int64)}
	figs, err := cases[0].Run(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{FigStartup, FigFrameAt30, FigFrameAt45} {
		if figs[k] <= 0 {
			t.Errorf("%s = %v", k, figs[k])
		}
	}
	// Three runs of three probes each; the fake player's start-up is subtracted, which
	// its runtime's reads of /proc make vary by a few hundred bytes.
	if want := float64(9 * fakeProbe); figs[FigBytesRead] < want-rcharNoise || figs[FigBytesRead] > want+rcharNoise {
		t.Errorf("read %v bytes, want %v", figs[FigBytesRead], want)
	}
	for _, k := range []string{FigFirstFrameBytes, FigAt30Bytes, FigAt45Bytes} {
		if figs[k] != 1000 {
			t.Errorf("%s = %v, want the counter's step", k, figs[k])
		}
	}
	if r := figs[FigAt30Read]; r < 3*fakeProbe-rcharNoise || r > 3*fakeProbe+rcharNoise {
		t.Errorf("the -ss 30 run read %v bytes, want %v", r, 3*fakeProbe)
	}
	for _, c := range cases[2:] {
		figs, err := c.Run(t.Context(), env)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if figs[FigFiles] != 3 || figs[FigScan] < figs[FigProbeMax] || figs[FigProbeMax] < figs[FigProbeMedian] {
			t.Errorf("%s: scan figures %v", c.Name, figs)
		}
	}
}

func TestPlayersWrongBytesAreAMismatch(t *testing.T) {
	cfg := fakeConfig(t)
	m := fakeMedia(t, 2, 2)
	cases, err := mediaCases(t.Context(), cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, m, func(dir string) {
		p := filepath.Join(dir, "clip.mkv")
		data, _ := os.ReadFile(p)
		data[len(data)-1] ^= 1 // in the index a player reads at the end
		os.WriteFile(p, data, 0o644)
	})
	env := dirEnv{root: root, calls: new(int64)}
	if _, err := cases[0].Run(t.Context(), env); err != nil {
		t.Errorf("mp4: %v", err)
	}
	if _, err := cases[1].Run(t.Context(), env); !IsMismatch(err) || !strings.Contains(err.Error(), "players/clip.mkv") {
		t.Errorf("mkv: err = %v, want a mismatch in players/clip.mkv", err)
	}
	// A missing file in the library is a wrong listing.
	os.Remove(filepath.Join(root, playersDir, m.Library[1]))
	if _, err := cases[2].Run(t.Context(), env); !IsMismatch(err) {
		t.Errorf("scan: err = %v, want a mismatch", err)
	}
	// The MKV library is its own folder: the MP4's missing file does not touch it.
	if _, err := cases[3].Run(t.Context(), env); err != nil {
		t.Errorf("mkv scan: %v", err)
	}
	p := filepath.Join(root, playersDir, m.LibraryMKV[0])
	data, _ := os.ReadFile(p)
	data[0] ^= 1 // in the head ffprobe reads
	os.WriteFile(p, data, 0o644)
	if _, err := cases[3].Run(t.Context(), env); !IsMismatch(err) || !strings.Contains(err.Error(), "players/"+m.LibraryMKV[0]) {
		t.Errorf("mkv scan: err = %v, want a mismatch in players/%s", err, m.LibraryMKV[0])
	}
	if _, err := cases[4].Run(t.Context(), env); err != nil {
		t.Errorf("films scan: %v", err)
	}
	p = filepath.Join(root, playersDir, m.Films[1])
	data, _ = os.ReadFile(p)
	data[len(data)-1] ^= 1 // in the moov ffprobe reads at the end
	os.WriteFile(p, data, 0o644)
	if _, err := cases[4].Run(t.Context(), env); !IsMismatch(err) || !strings.Contains(err.Error(), "players/"+m.Films[1]) {
		t.Errorf("films scan: err = %v, want a mismatch in players/%s", err, m.Films[1])
	}
}

func TestPlayersNotADirectory(t *testing.T) {
	cfg := fakeConfig(t)
	cases, err := mediaCases(t.Context(), cfg, fakeMedia(t, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 4 {
		t.Errorf("%d cases without films, want 4", len(cases))
	}
	if _, err := cases[0].Run(t.Context(), mapEnv{}); err == nil || IsMismatch(err) {
		t.Errorf("err = %v, want the trial's error", err)
	}
}

func TestPlayersUnavailableWithoutFFmpeg(t *testing.T) {
	for _, tc := range []struct {
		films int
		last  string
	}{{0, "players ffprobe 2 mkv files"}, {3, "players ffprobe 3 films"}} {
		cases := playersCases(PlayersConfig{FFmpeg: filepath.Join(t.TempDir(), "no-ffmpeg"), MediaDir: t.TempDir(),
			Media: MediaSpec{Seconds: 60, Size: "64x36", Bitrate: "100k", LibraryFiles: 2, LibrarySeconds: 10,
				FilmFiles: tc.films, FilmSeconds: 120}})
		if want := 4 + min(tc.films, 1); len(cases) != want || cases[len(cases)-1].Name != tc.last {
			t.Fatalf("films %d: %d cases, want %d ending with %q", tc.films, len(cases), want, tc.last)
		}
		for _, c := range cases {
			if !strings.Contains(c.Unavailable, "make bench-deps") || c.Run != nil {
				t.Errorf("%s: unavailable %q", c.Name, c.Unavailable)
			}
		}
	}
}

// TestPlayersRealFFmpeg generates small media with the real ffmpeg, checks its layout
// (the MP4's and the films' moov and the MKV's cues at the end, the MKV library in
// Matroska) and that generating again makes the same bytes, and runs the cases on it
// from local disk.
func TestPlayersRealFFmpeg(t *testing.T) {
	ffmpeg, err1 := exec.LookPath("ffmpeg")
	ffprobe, err2 := exec.LookPath("ffprobe")
	if err1 != nil || err2 != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_FFMPEG") == "1" {
			t.Fatalf("PLAYHEAD_REQUIRE_FFMPEG=1 and ffmpeg or ffprobe is missing: %v, %v", err1, err2)
		}
		t.Skip("ffmpeg is not installed (make bench-deps installs it)")
	}
	spec := MediaSpec{Seconds: 60, Size: "160x90", Bitrate: "200k", LibraryFiles: 3, LibrarySeconds: 10,
		FilmFiles: 2, FilmSeconds: 120}
	m, err := PrepareMedia(t.Context(), ffmpeg, t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	again, err := PrepareMedia(t.Context(), ffmpeg, t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range slices.Concat([]string{m.MP4, m.MKV}, m.Library, m.LibraryMKV, m.Films) {
		a, _ := os.ReadFile(filepath.Join(m.Dir, rel))
		b, _ := os.ReadFile(filepath.Join(again.Dir, rel))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes, generated again %d bytes, equal %v", rel, len(a), len(b), bytes.Equal(a, b))
		}
	}
	mp4, _ := os.ReadFile(filepath.Join(m.Dir, m.MP4))
	if boxes := topBoxes(t, mp4); boxes[len(boxes)-1] != "moov" || !slices.Contains(boxes, "mdat") {
		t.Errorf("mp4 boxes %v, want moov last", boxes)
	}
	mkv, _ := os.ReadFile(filepath.Join(m.Dir, m.MKV))
	if cues := bytes.LastIndex(mkv, []byte{0x1c, 0x53, 0xbb, 0x6b}); cues < len(mkv)*9/10 {
		t.Errorf("mkv cues at %d of %d bytes, want them at the end", cues, len(mkv))
	}
	if len(m.LibraryMKV) != spec.LibraryFiles {
		t.Errorf("mkv library %q, want %d files", m.LibraryMKV, spec.LibraryFiles)
	}
	for _, rel := range m.LibraryMKV {
		// Matroska is EBML: its first element's ID is the EBML header's.
		data, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(rel)))
		if err != nil || !bytes.HasPrefix(data, []byte{0x1a, 0x45, 0xdf, 0xa3}) {
			t.Errorf("%s: not Matroska (err %v, starts % x)", rel, err, data[:min(len(data), 4)])
		}
	}
	if len(m.Films) != spec.FilmFiles {
		t.Errorf("films %q, want %d files", m.Films, spec.FilmFiles)
	}
	for _, rel := range m.Films {
		data, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if boxes := topBoxes(t, data); len(boxes) == 0 || boxes[len(boxes)-1] != "moov" {
			t.Errorf("%s: boxes %v, want moov last", rel, boxes)
		}
	}

	cases, err := mediaCases(t.Context(), PlayersConfig{FFmpeg: ffmpeg, FFprobe: ffprobe}, m)
	if err != nil {
		t.Fatal(err)
	}
	env := dirEnv{root: rootOf(t, m, nil), calls: new(int64)}
	for _, c := range cases {
		figs, err := c.Run(t.Context(), env)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if figs[FigStartup] <= 0 || figs[FigBytesRead] <= 0 {
			t.Errorf("%s: figures %v", c.Name, figs)
		}
		t.Logf("%s: %v", c.Name, figs)
	}
}

// topBoxes lists the types of an MP4's top-level boxes.
func topBoxes(t *testing.T, data []byte) []string {
	var types []string
	for off := 0; off+8 <= len(data); {
		size := int(binary.BigEndian.Uint32(data[off:]))
		if size == 1 && off+16 <= len(data) {
			size = int(binary.BigEndian.Uint64(data[off+8:]))
		}
		types = append(types, string(data[off+4:off+8]))
		if size < 8 {
			t.Fatalf("box %q at %d: size %d", data[off+4:off+8], off, size)
		}
		off += size
	}
	return types
}

package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// MediaSpec is the media the players scenario generates with FFmpeg's test sources.
type MediaSpec struct {
	Seconds int    // the clip's length, s
	Size    string // its frame size, WxH
	Bitrate string // its video bitrate, as ffmpeg's -b:v takes it ("20M")
	// LibraryFiles is how many files the scanned folder holds, each LibrarySeconds long:
	// stretches of the clip copied without re-encoding, so they differ and cost no
	// encoding time.
	LibraryFiles   int
	LibrarySeconds int
	// FilmFiles is how many files the folder of films holds, each FilmSeconds long, its
	// moov at the end: one small-frame encode hard-linked under each name, as a film's
	// moov grows with its length, not its bitrate.
	FilmFiles   int
	FilmSeconds int
}

// FullMedia is the benchmark's media: a 60 s clip at about 20 Mbit/s (150 MB), and a
// library of 20 ten-second files cut from it (about 25 MB each), also in Matroska, and
// 10 two-hour films of 93 MB, their moov 6 MB (one encode under ten names).
func FullMedia() MediaSpec {
	return MediaSpec{Seconds: 60, Size: "1280x720", Bitrate: "20M", LibraryFiles: 20, LibrarySeconds: 10,
		FilmFiles: 10, FilmSeconds: 7200}
}

// Media is the generated media on local disk. Paths are relative to Dir, and are the
// origin's paths below the players scenario's directory, so a player's output (ffprobe
// prints the file name) is the same on every system.
type Media struct {
	Dir     string
	MP4     string   // the clip as MP4, its index (moov) at the end, as ffmpeg writes it
	MKV     string   // the same streams in Matroska, its cues at the end
	Library []string // the scanned folder's MP4s, in name order
	// LibraryMKV is the same files remuxed to Matroska, in their own folder, in name order.
	LibraryMKV []string
	// Films is the folder of films, in name order: the same bytes under each name, the
	// moov at the end.
	Films []string
}

// mediaRecipe is part of the cache key: a change to the commands below must change it,
// or an old cache would be reused.
const mediaRecipe = "players-media-v3"

// Media file names below Media.Dir.
const (
	clipMP4       = "clip.mp4"
	clipMKV       = "clip.mkv"
	libraryDir    = "library"
	libraryMKVDir = "library-mkv"
	filmsDir      = "library-films"
	doneMarker    = ".complete"
)

// PrepareMedia returns the media of spec under cacheDir, generating it with ffmpeg the
// first time (for FullMedia about 3.5 min, 3 of them the film's encode). The cache is
// keyed by the recipe, spec and ffmpeg's version, and filled in a temporary directory
// renamed into place, so an interrupted generation is never reused. Generation is
// deterministic: x264 and the filters run on one thread each and the muxers are
// bit-exact, so the same ffmpeg makes the same bytes.
func PrepareMedia(ctx context.Context, ffmpeg, cacheDir string, spec MediaSpec) (Media, error) {
	ver, err := exec.CommandContext(ctx, ffmpeg, "-version").Output()
	if err != nil {
		return Media{}, fmt.Errorf("media: %s -version: %w", ffmpeg, err)
	}
	firstLine, _, _ := strings.Cut(string(ver), "\n")
	key := sha256.Sum256(fmt.Appendf(nil, "%s\n%+v\n%s", mediaRecipe, spec, firstLine))
	dir := filepath.Join(cacheDir, hex.EncodeToString(key[:8]))
	m := Media{Dir: dir, MP4: clipMP4, MKV: clipMKV}
	for i := range spec.LibraryFiles {
		m.Library = append(m.Library, filepath.ToSlash(filepath.Join(libraryDir, fmt.Sprintf("lib-%03d.mp4", i))))
		m.LibraryMKV = append(m.LibraryMKV, filepath.ToSlash(filepath.Join(libraryMKVDir, fmt.Sprintf("lib-%03d.mkv", i))))
	}
	for i := range spec.FilmFiles {
		m.Films = append(m.Films, filepath.ToSlash(filepath.Join(filmsDir, fmt.Sprintf("film-%03d.mp4", i))))
	}
	if _, err := os.Stat(filepath.Join(dir, doneMarker)); err == nil {
		return m, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return Media{}, err
	}
	tmp, err := os.MkdirTemp(cacheDir, "tmp-")
	if err != nil {
		return Media{}, err
	}
	defer os.RemoveAll(tmp)
	if err := generateMedia(ctx, ffmpeg, tmp, spec, m.Library, m.LibraryMKV, m.Films); err != nil {
		return Media{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, doneMarker), []byte(firstLine+"\n"), 0o644); err != nil {
		return Media{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another bench made it meanwhile: theirs is as good.
		if _, serr := os.Stat(filepath.Join(dir, doneMarker)); serr == nil {
			return m, nil
		}
		return Media{}, err
	}
	return m, nil
}

// bitexact keeps the muxers from writing the encoder's version and the date.
var bitexact = []string{"-fflags", "+bitexact", "-map_metadata", "-1"}

// generateMedia writes the clip, its Matroska copy, the library, its Matroska copy
// (libraryMKV[i] remuxed from library[i]) and the films into dir.
func generateMedia(ctx context.Context, ffmpeg, dir string, spec MediaSpec, library, libraryMKV, films []string) error {
	secs := strconv.Itoa(spec.Seconds)
	encode := testEncode(spec.Size, secs, "128k",
		"-b:v", spec.Bitrate, "-minrate", spec.Bitrate, "-maxrate", spec.Bitrate, "-bufsize", spec.Bitrate)
	if err := ffmpegRun(ctx, ffmpeg, dir, append(encode, clipMP4)); err != nil {
		return err
	}
	remux := append([]string{"-i", clipMP4, "-map", "0", "-c", "copy"}, bitexact...)
	if err := ffmpegRun(ctx, ffmpeg, dir, append(remux, clipMKV)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, libraryDir), 0o755); err != nil {
		return err
	}
	span := max(spec.Seconds-spec.LibrarySeconds, 0)
	for i, name := range library {
		// Each file starts at its own keyframe-aligned point of the clip (-ss before -i
		// with stream copy starts at the keyframe at or before it).
		start := strconv.Itoa(span * i / max(len(library), 1))
		args := append([]string{"-ss", start, "-i", clipMP4, "-t", strconv.Itoa(spec.LibrarySeconds),
			"-map", "0", "-c", "copy"}, bitexact...)
		if err := ffmpegRun(ctx, ffmpeg, dir, append(args, filepath.FromSlash(name))); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, libraryMKVDir), 0o755); err != nil {
		return err
	}
	for i, name := range libraryMKV {
		args := append([]string{"-i", filepath.FromSlash(library[i]), "-map", "0", "-c", "copy"}, bitexact...)
		if err := ffmpegRun(ctx, ffmpeg, dir, append(args, filepath.FromSlash(name))); err != nil {
			return err
		}
	}
	return generateFilms(ctx, ffmpeg, dir, spec.FilmSeconds, films)
}

// generateFilms encodes films[0], FilmSeconds long at 160x90 and about 100 kbit/s, with
// the moov at the end (no faststart), and links the other names to it: their bytes are
// the same, but the origin serves each path and the daemon caches each apart.
func generateFilms(ctx context.Context, ffmpeg, dir string, seconds int, films []string) error {
	if len(films) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, filmsDir), 0o755); err != nil {
		return err
	}
	secs := strconv.Itoa(seconds)
	encode := testEncode("160x90", secs, "32k", "-b:v", "64k")
	first := filepath.FromSlash(films[0])
	if err := ffmpegRun(ctx, ffmpeg, dir, append(encode, first)); err != nil {
		return err
	}
	for _, name := range films[1:] {
		if err := linkOrCopy(filepath.Join(dir, first), filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			return err
		}
	}
	return nil
}

// testEncode is ffmpeg's arguments, but for the output name, to encode FFmpeg's test
// picture of size and a sine tone, secs long, as H.264 with the video rate flags rate and
// AAC at audio bits a second, bit-exact. One thread: x264's rate control over several
// threads is not deterministic. A keyframe every 2 s, as streaming encodes have.
func testEncode(size, secs, audio string, rate ...string) []string {
	args := []string{"-filter_threads", "1",
		"-f", "lavfi", "-i", "testsrc2=size=" + size + ":rate=30:duration=" + secs,
		"-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=" + secs,
		"-c:v", "libx264", "-preset", "ultrafast", "-threads", "1", "-g", "60"}
	args = append(args, rate...)
	args = append(args, "-flags:v", "+bitexact", "-c:a", "aac", "-b:a", audio, "-flags:a", "+bitexact")
	return append(args, bitexact...)
}

// linkOrCopy makes dst a hard link to src, or a copy where links are not supported.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ffmpegRun runs ffmpeg quietly in dir with args, overwriting its output.
func ffmpegRun(ctx context.Context, ffmpeg, dir string, args []string) error {
	cmd := exec.CommandContext(ctx, ffmpeg, append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || len(out) > 0 {
			return fmt.Errorf("media: ffmpeg %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("media: ffmpeg: %w", err)
	}
	return nil
}

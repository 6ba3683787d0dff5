package origin

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/playhead/playhead/internal/pattern"
)

// etag is the strong ETag of generation gen of a generated file.
func etag(f File, gen int64) string {
	return fmt.Sprintf(`"%d-%d-%d"`, f.Seed, f.Size, gen)
}

// Seed returns the pattern seed of generation gen of a file with seed: Replace changes the
// bytes by moving to the next seed.
func Seed(seed uint64, gen int64) uint64 { return seed + uint64(gen) }

func (s *Server) mtime(gen int64) time.Time {
	return s.modTime.Add(time.Duration(gen) * time.Second)
}

// contentType names the type by extension; an unknown one is sent as octet-stream so
// ServeContent does not read 512 bytes to sniff it.
func contentType(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Content is a file's bytes, positioned at 0.
type Content interface {
	io.ReadSeeker
	io.ReaderAt
	io.Closer
}

// Open returns the bytes of generation gen of f: the pattern, or Size bytes of its file
// on disk (a shorter file fails the reads past its end, never serves fewer bytes than
// Size says). The caller closes it.
func (f File) Open(gen int64) (Content, error) {
	if f.Path == "" {
		return nopCloser{&pattern.Reader{Seed: Seed(f.Seed, gen), Size: f.Size}}, nil
	}
	if gen != 0 {
		return nil, fmt.Errorf("origin: %s has no generation %d", f.Path, gen)
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	return sectionFile{io.NewSectionReader(fh, 0, f.Size), fh}, nil
}

type nopCloser struct{ *pattern.Reader }

func (nopCloser) Close() error { return nil }

// sectionFile is Size bytes of an open file.
type sectionFile struct {
	*io.SectionReader
	f *os.File
}

func (s sectionFile) Close() error { return s.f.Close() }

// serveGenerated serves a generated file with ranges and conditions.
func (s *Server) serveGenerated(w http.ResponseWriter, r *http.Request, p string, f vfile) {
	rd, err := f.Open(f.gen)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer rd.Close()
	w.Header().Set("ETag", etag(f.File, f.gen))
	w.Header().Set("Content-Type", contentType(p))
	http.ServeContent(w, r, "", s.mtime(f.gen), rd)
}

// serveDisk serves the file p of Dir, if there is one; it reports whether it answered.
func (s *Server) serveDisk(w http.ResponseWriter, r *http.Request, p string) bool {
	if s.root == nil || p == "" {
		return false
	}
	f, err := s.root.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	mtime := fi.ModTime().Truncate(time.Second)
	// nginx's ETag: hex mtime and size.
	w.Header().Set("ETag", `"`+strconv.FormatInt(mtime.Unix(), 16)+"-"+strconv.FormatInt(fi.Size(), 16)+`"`)
	w.Header().Set("Content-Type", contentType(p))
	http.ServeContent(w, r, "", mtime, io.ReadSeeker(f))
	return true
}

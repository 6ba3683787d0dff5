package integration

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/playhead/playhead/internal/faultorigin"
	"github.com/playhead/playhead/internal/objstore"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/vfs"
)

// TestModelChangesThroughFUSE is the changed-object model through the kernel: rapid
// draws opens, closes, reads and replacements of one file (same size or not, an origin
// with or without ETags, a JSON or an HTML listing) and every read goes through a real
// mount, so the kernel's one page cache per file is part of what is checked. A handle
// returns bytes of one version only, never older than the one current when it was
// opened (a handle that has returned nothing yet may follow a newer replacement); a
// handle of the current version returns every byte asked for; an older one may instead
// end early or fail with ESTALE, nothing else.
func TestModelChangesThroughFUSE(t *testing.T) {
	checkChangesModel(t, 12, 150, newFaultModelOrigin)
}

// TestModelChangesOverMinIO is the same model over a bucket on MinIO (one server for
// the test, a fresh bucket per case): S3 gives no control of an object's time, so
// replacements within one second differ by their ETag only, and every ranged GET is
// conditional on it.
func TestModelChangesOverMinIO(t *testing.T) {
	srv := objstore.Start(t, objstore.S3)
	srv.SetEnv(t)
	checkChangesModel(t, 6, 100, func(*rapid.T) modelOrigin {
		return &minioModelOrigin{srv: srv, b: srv.NewBucket(t)}
	})
}

// checkChangesModel runs the model over origins newOrigin makes, checks cases (longChecks
// with PLAYHEAD_LONG=1; -rapid.checks or RAPID_CHECKS win), and prints the figure.
func checkChangesModel(t *testing.T, checks, longChecks int, newOrigin func(*rapid.T) modelOrigin) {
	if long() {
		checks = longChecks
	}
	explicit := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if !explicit {
		f := flag.Lookup("rapid.checks")
		old := f.Value.String()
		f.Value.Set(fmt.Sprint(checks))
		t.Cleanup(func() { f.Value.Set(old) })
	}
	cases, reads := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		cases++
		reads += runChangesModel(t, rt, newOrigin(rt))
	})
	figure(t, "%d cases, %d reads through the mount across replacements, every byte checked", cases, reads)
}

// modelOrigin is where the model's one file, f.bin, lives.
type modelOrigin interface {
	// put makes version gen, size bytes of the pattern of seed, the current f.bin.
	put(t *testing.T, gen int, seed uint64, size int64)
	// mount mounts the origin's root with opts.
	mount(t *testing.T, opts vfs.Options) *mount
	close()
}

// faultModelOrigin is the fault origin, drawn with or without ETags and with a JSON or
// an HTML listing.
type faultModelOrigin struct{ s *faultorigin.Server }

func newFaultModelOrigin(rt *rapid.T) modelOrigin {
	s := faultorigin.New()
	s.SetNoETags(rapid.Bool().Draw(rt, "noETags"))
	s.SetHTMLListing(rapid.Bool().Draw(rt, "htmlListing"))
	return &faultModelOrigin{s}
}

func (o *faultModelOrigin) put(_ *testing.T, gen int, seed uint64, size int64) {
	// Each version has its own second, so an origin without ETags can still tell them apart.
	mod := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(gen) * time.Second)
	o.s.Put("f.bin", seed, size, mod)
}

func (o *faultModelOrigin) mount(t *testing.T, opts vfs.Options) *mount {
	return mountHTTP(t, o.s.URL, opts)
}

func (o *faultModelOrigin) close() { o.s.Close() }

// minioModelOrigin is a bucket on MinIO; the server outlives it.
type minioModelOrigin struct {
	srv *objstore.Server
	b   *objstore.Bucket
}

func (o *minioModelOrigin) put(t *testing.T, _ int, seed uint64, size int64) {
	o.b.Put(t, "f.bin", patternData(seed, size))
}

func (o *minioModelOrigin) mount(t *testing.T, opts vfs.Options) *mount {
	return mountURL(t, o.b.URL(""), o.srv.Params(), opts)
}

func (o *minioModelOrigin) close() {}

// changesModel is the state the test keeps of the origin and the open handles.
type changesModel struct {
	t      *testing.T
	origin modelOrigin
	gen    int     // current version
	seeds  []int64 // size of each version, by gen
	hs     []changesHandle
}

type changesHandle struct {
	f     *os.File
	gen   int // version current at the open
	bound int // version its bytes have shown, -1 until one read tells
}

func (m *changesModel) seed(gen int) uint64 { return uint64(1000 + gen) }

func (m *changesModel) put(size int64) {
	m.seeds = append(m.seeds, size)
	m.gen = len(m.seeds) - 1
	m.origin.put(m.t, m.gen, m.seed(m.gen), size)
}

func runChangesModel(t *testing.T, rt *rapid.T, origin modelOrigin) (reads int) {
	const bs = 256 << 10
	defer origin.close()
	m := &changesModel{t: t, origin: origin}
	sizes := rapid.SampledFrom([]int64{3 * bs, 3*bs + 77, 8 << 20, 8<<20 + 1})
	m.put(sizes.Draw(rt, "size"))

	opts := testOptions(t)
	opts.ListTTL = -1
	opts.Fetch.IOTimeout = 2 * time.Second
	mnt := origin.mount(t, opts)
	defer mnt.Unmount()
	defer func() {
		for _, h := range m.hs {
			h.f.Close()
		}
	}()
	path := mnt.Path("f.bin")

	steps := rapid.IntRange(4, 25).Draw(rt, "steps")
	for i := range steps {
		switch op := rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("op%d", i)); {
		case op <= 1 || len(m.hs) == 0:
			if len(m.hs) >= 3 {
				m.hs[0].f.Close()
				m.hs = m.hs[1:]
			}
			f, err := os.Open(path)
			if err != nil {
				rt.Fatalf("open after %d versions: %v", m.gen+1, err)
			}
			m.hs = append(m.hs, changesHandle{f, m.gen, -1})
		case op == 2:
			k := rapid.IntRange(0, len(m.hs)-1).Draw(rt, "close")
			m.hs[k].f.Close()
			m.hs = append(m.hs[:k], m.hs[k+1:]...)
		case op == 3:
			if rapid.Bool().Draw(rt, "sameSize") {
				m.put(m.seeds[m.gen])
			} else {
				m.put(sizes.Draw(rt, "newSize"))
			}
		default:
			k := rapid.IntRange(0, len(m.hs)-1).Draw(rt, "handle")
			size := m.seeds[m.hs[k].gen]
			off := rapid.Int64Range(0, size).Draw(rt, "off")
			n := rapid.IntRange(1, 3<<20).Draw(rt, "n")
			m.read(rt, k, off, n)
			reads++
		}
	}
	return reads
}

// read checks one pread of handle k against the model.
func (m *changesModel) read(rt *rapid.T, k int, off int64, n int) {
	h := &m.hs[k]
	p := make([]byte, n)
	got, err := h.f.ReadAt(p, off)
	m.bind(rt, h, p[:got], off)
	ver := h.gen
	if h.bound >= 0 {
		ver = h.bound
	}
	want := int(max(min(int64(n), m.seeds[ver]-off), 0))
	switch {
	case ver != m.gen && (errors.Is(err, syscall.ESTALE) || got < want):
		// A handle of an older version may lose the object it opened.
	case err != nil && !(err == io.EOF && got < n):
		rt.Fatalf("handle of version %d (opened at %d, current %d): %d bytes at %d: %v", ver, h.gen, m.gen, n, off, err)
	case got != want:
		rt.Fatalf("handle of version %d (opened at %d, current %d): %d bytes at %d gave %d, want %d", ver, h.gen, m.gen, n, off, got, want)
	}
}

// bind checks that data, read at off, is of the handle's version; a handle whose
// version no read has told yet takes the newest version data matches, which must not
// be older than the one current at its open.
func (m *changesModel) bind(rt *rapid.T, h *changesHandle, data []byte, off int64) {
	if h.bound >= 0 {
		if err := pattern.Verify(m.seed(h.bound), data, off); err != nil {
			rt.Fatalf("handle of version %d (current %d) read %d bytes at %d: %v", h.bound, m.gen, len(data), off, err)
		}
		return
	}
	if len(data) == 0 {
		return
	}
	for g := m.gen; g >= h.gen; g-- {
		if pattern.Verify(m.seed(g), data, off) == nil {
			if len(data) >= 64 { // enough bytes that no other version matches by chance
				h.bound = g
			}
			return
		}
	}
	of := "no version"
	for g := h.gen - 1; g >= 0; g-- {
		if pattern.Verify(m.seed(g), data, off) == nil {
			of = fmt.Sprintf("version %d, older than the open", g)
			break
		}
	}
	// Which version each page of data is (-1: none), so a failure says how they mix:
	// whole blocks of another version point at the daemon, stray pages at the kernel.
	var segs []string
	last, from := -2, int64(0)
	for i := int64(0); i < int64(len(data)); {
		e := min((off+i)/4096*4096+4096-off, int64(len(data)))
		v := -1
		for g := m.gen; g >= 0; g-- {
			if pattern.Verify(m.seed(g), data[i:e], off+i) == nil {
				v = g
				break
			}
		}
		if v != last {
			if last != -2 {
				segs = append(segs, fmt.Sprintf("[%d,%d)=v%d", from, off+i, last))
			}
			last, from = v, off+i
		}
		i = e
	}
	segs = append(segs, fmt.Sprintf("[%d,%d)=v%d", from, off+int64(len(data)), last))
	rt.Fatalf("handle opened at version %d (current %d) read %d bytes at %d of %s; pages: %v", h.gen, m.gen, len(data), off, of, segs)
}

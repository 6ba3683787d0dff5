package scenario

import (
	"context"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/playhead/playhead/internal/pattern"
)

// mapEnv is an Env whose "mount" is an in-memory fs.FS holding the cases' files.
type mapEnv struct{ fsys fs.FS }

func (e mapEnv) Mount(context.Context) (fs.FS, error) { return e.fsys, nil }
func (e mapEnv) Unmount() error                       { return nil }

func filesFS(c Case) fstest.MapFS {
	m := fstest.MapFS{}
	for p, f := range c.Files {
		data := make([]byte, f.Size)
		pattern.Fill(seedOf(f), data, 0)
		m[p] = &fstest.MapFile{Data: data}
	}
	return m
}

// slowFS delays the read at one offset of every file, on the (bubble's) clock.
type slowFS struct {
	fs.FS
	off   int64
	delay time.Duration
}

func (s slowFS) Open(name string) (fs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return slowFile{f, s}, nil
}

type slowFile struct {
	fs.File
	s slowFS
}

func (f slowFile) ReadAt(p []byte, off int64) (int, error) {
	if off == f.s.off {
		time.Sleep(f.s.delay)
	}
	return f.File.(io.ReaderAt).ReadAt(p, off)
}

func shuffledSizes() Sizes {
	s := Full()
	s.ShuffledFile = 4 << 20 // 32 pieces, 4 windows
	return s
}

func TestShuffledCountsOneLatePieceOnce(t *testing.T) {
	c := shuffledCase(shuffledSizes())
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		freezes float64
	}{{"on time", 0, 0}, {"one slow piece", 300 * time.Millisecond, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Piece 20 is in window 2; a 300 ms read misses its due time by far more
				// than the threshold, and the timeline then shifts: one freeze.
				env := mapEnv{slowFS{filesFS(c), 20 * (128 << 10), tc.delay}}
				f, err := c.Run(t.Context(), env)
				if err != nil {
					t.Fatal(err)
				}
				if f[FigFreezes] != tc.freezes {
					t.Errorf("freezes %v, want %v (%v)", f[FigFreezes], tc.freezes, f)
				}
				if f[FigBytesRead] != 4<<20 {
					t.Errorf("read %v bytes", f[FigBytesRead])
				}
			})
		})
	}
}

func TestWrongBytesAreAMismatch(t *testing.T) {
	s := Full()
	s.ThumbFiles, s.ThumbFile = 2, 1<<20
	c := thumbsCase(s)
	fsys := filesFS(c)
	fsys["thumbs/thumbs-001.mkv"].Data[(1<<20)-5] ^= 1 // in the last 64 KiB
	_, err := c.Run(t.Context(), mapEnv{fsys})
	if !IsMismatch(err) || !strings.Contains(err.Error(), "offset 1048571") {
		t.Errorf("err = %v, want a mismatch at offset 1048571", err)
	}
}

func TestCasesNamesAndUnknown(t *testing.T) {
	cases, err := Cases([]string{"rewatch", "play"}, Quick())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "play 3MB/s,play 8MB/s,play 20MB/s,rewatch 3MB/s" {
		t.Errorf("cases %s", got)
	}
	if _, err := Cases([]string{"plya"}, Quick()); err == nil || !strings.Contains(err.Error(), "plya") {
		t.Errorf("unknown scenario: %v", err)
	}
}

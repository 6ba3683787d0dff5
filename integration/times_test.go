package integration

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Times the tree of TestModTimesMatchOrigin is given on disk: none on a whole minute, so
// a listing's minute and Last-Modified's second differ.
var (
	fileTime    = time.Date(2026, 11, 24, 11, 54, 14, 0, time.UTC) // a.bin, the root's newest
	subFileTime = time.Date(2026, 11, 21, 7, 3, 41, 0, time.UTC)   // sub/b.bin
	subDirTime  = time.Date(2026, 11, 20, 8, 7, 9, 0, time.UTC)    // sub/
	changedTime = time.Date(2026, 12, 1, 18, 30, 52, 0, time.UTC)  // a.bin, replaced
)

// writeTimedTree writes the tree into a fresh directory with the times above.
func writeTimedTree(t *testing.T) string {
	t.Helper()
	www := t.TempDir()
	writePatternFile(t, filepath.Join(www, "a.bin"), 1, 1000)
	writePatternFile(t, filepath.Join(www, "sub", "b.bin"), 2, 2000)
	for p, tm := range map[string]time.Time{"a.bin": fileTime, "sub/b.bin": subFileTime, "sub": subDirTime} {
		if err := os.Chtimes(filepath.Join(www, p), tm, tm); err != nil {
			t.Fatal(err)
		}
	}
	return www
}

// apacheIndex serves www as Apache's mod_autoindex does: directories as an HTML table
// with times to the minute and sizes rounded (so every size needs a HEAD), files with
// Last-Modified.
func apacheIndex(www string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := filepath.Join(www, filepath.FromSlash(r.URL.Path))
		if !strings.HasSuffix(r.URL.Path, "/") {
			http.ServeFile(w, r, p) // a directory redirects to its slash form
			return
		}
		des, err := os.ReadDir(p)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html;charset=UTF-8")
		fmt.Fprint(w, "<html><body><table>\n<tr><th><a href=\"?C=N;O=D\">Name</a></th><th>Last modified</th><th>Size</th></tr>\n")
		fmt.Fprint(w, "<tr><td><a href=\"../\">Parent Directory</a></td><td>&nbsp;</td><td>  - </td></tr>\n")
		for _, de := range des {
			info, err := de.Info()
			if err != nil {
				continue
			}
			name, size := de.Name(), fmt.Sprintf("%.1fK", float64(info.Size())/1024)
			if de.IsDir() {
				name, size = name+"/", "-"
			}
			fmt.Fprintf(w, "<tr><td><a href=\"%s\">%s</a></td><td align=\"right\">%s  </td><td align=\"right\">%s</td></tr>\n",
				(&url.URL{Path: name}).EscapedPath(), html.EscapeString(name), info.ModTime().UTC().Format("2006-01-02 15:04"), size)
		}
		fmt.Fprint(w, "</table></body></html>\n")
	})
}

// lastModified asks the origin for the Last-Modified of the file at u.
func lastModified(t *testing.T, u string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	lm, err := http.ParseTime(resp.Header.Get("Last-Modified"))
	if err != nil {
		t.Fatalf("HEAD %s: Last-Modified %q: %v", u, resp.Header.Get("Last-Modified"), err)
	}
	return lm
}

func mtimeOf(t *testing.T, p string) time.Time {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return time.Unix(st.Mtim.Unix()).UTC()
}

// Through a mount of each listing format, stat shows the origin's Last-Modified: to the
// minute where an HTML listing gives the time, to the second where a JSON listing or a
// HEAD does. The time is the same before and after a read, directories get theirs, and a
// replaced file shows its new time.
func TestModTimesMatchOrigin(t *testing.T) {
	nginx := func(html bool) func(t *testing.T, www string) string {
		return func(t *testing.T, www string) string {
			h, j := serveNginx(t, www)
			if html {
				return h
			}
			return j
		}
	}
	httpServer := func(h func(www string) http.Handler) func(t *testing.T, www string) string {
		return func(t *testing.T, www string) string {
			srv := httptest.NewServer(h(www))
			t.Cleanup(srv.Close)
			return srv.URL + "/"
		}
	}
	fileServer := func(www string) http.Handler { return http.FileServer(http.Dir(www)) }
	minute := func(tm time.Time) time.Time { return tm.Truncate(time.Minute) }
	exact := func(tm time.Time) time.Time { return tm }
	for _, c := range []struct {
		name     string
		serve    func(t *testing.T, www string) string // the origin's base URL
		shown    func(time.Time) time.Time             // the listing's precision
		dirTimes bool                                  // the listing gives directories times
	}{
		{"nginx html", nginx(true), minute, true},
		{"nginx json", nginx(false), exact, true},
		{"apache html", httpServer(apacheIndex), minute, true},
		{"go fileserver", httpServer(fileServer), exact, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			www := writeTimedTree(t)
			base := c.serve(t, www)
			opts := testOptions(t)
			opts.ListTTL = -1 // every stat asks the origin: a change shows at once
			m := mountHTTP(t, base, opts)
			lm := lastModified(t, base+"a.bin")
			if !lm.Equal(fileTime) {
				t.Fatalf("origin's Last-Modified %v, want the file's %v", lm, fileTime)
			}
			for _, when := range []string{"before reading", "again", "after reading"} {
				if when == "after reading" {
					verifyWhole(t, m.Path("a.bin"), 1, 1000)
				}
				if got := mtimeOf(t, m.Path("a.bin")); !got.Equal(c.shown(lm)) {
					t.Errorf("a.bin %s: mtime %v, want %v (Last-Modified %v)", when, got, c.shown(lm), lm)
				}
			}
			if got, want := mtimeOf(t, m.Path("sub/b.bin")), c.shown(subFileTime); !got.Equal(want) {
				t.Errorf("sub/b.bin: mtime %v, want %v", got, want)
			}
			if c.dirTimes {
				if got, want := mtimeOf(t, m.Path("sub")), c.shown(subDirTime); !got.Equal(want) {
					t.Errorf("sub/: mtime %v, want the listing's %v", got, want)
				}
				if got, want := mtimeOf(t, m.Dir), c.shown(fileTime); !got.Equal(want) {
					t.Errorf("root: mtime %v, want its newest entry's %v", got, want)
				}
			}

			// The origin replaces a.bin: the mount shows the new time.
			writePatternFile(t, filepath.Join(www, "a.bin"), 3, 1500)
			if err := os.Chtimes(filepath.Join(www, "a.bin"), changedTime, changedTime); err != nil {
				t.Fatal(err)
			}
			if got, want := mtimeOf(t, m.Path("a.bin")), c.shown(changedTime); !got.Equal(want) {
				t.Errorf("replaced a.bin: mtime %v, want %v", got, want)
			}
		})
	}
}

package origin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// entry is one line of a listing.
type entry struct {
	name  string
	isDir bool
	size  int64
	mtime time.Time
}

// children lists the directory p: generated files and directories implied by their
// paths, then Dir's entries that no generated one shadows. Directories first, then by
// name, as nginx sorts.
func (s *Server) children(p string) []entry {
	prefix := ""
	if p != "" {
		prefix = p + "/"
	}
	byName := make(map[string]entry)
	s.mu.Lock()
	for fp, f := range s.files {
		rest, ok := strings.CutPrefix(fp, prefix)
		if !ok {
			continue
		}
		if name, _, sub := strings.Cut(rest, "/"); sub {
			byName[name] = entry{name: name, isDir: true, mtime: s.modTime}
		} else {
			byName[name] = entry{name: name, size: f.Size, mtime: s.mtime(f.gen)}
		}
	}
	s.mu.Unlock()
	if s.root != nil {
		dir := p
		if dir == "" {
			dir = "."
		}
		if d, err := s.root.Open(dir); err == nil {
			des, _ := d.ReadDir(-1)
			d.Close()
			for _, de := range des {
				if _, shadowed := byName[de.Name()]; shadowed {
					continue
				}
				fi, err := de.Info()
				if err != nil || !(fi.IsDir() || fi.Mode().IsRegular()) {
					continue
				}
				byName[de.Name()] = entry{name: de.Name(), isDir: fi.IsDir(), size: fi.Size(),
					mtime: fi.ModTime().Truncate(time.Second)}
			}
		}
	}
	out := make([]entry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].isDir != out[j].isDir {
			return out[i].isDir
		}
		return out[i].name < out[j].name
	})
	return out
}

// acceptsJSON reports whether the client asked for JSON (with a non-zero quality), as
// playhead's HTTP source does; browsers do not, and get HTML.
func acceptsJSON(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		typ, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(typ), "application/json") {
			continue
		}
		for param := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(k, "q") {
				q, err := strconv.ParseFloat(v, 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}

func (s *Server) serveListing(w http.ResponseWriter, r *http.Request, p string) {
	entries := s.children(p)
	var buf bytes.Buffer
	if acceptsJSON(r) {
		writeJSONListing(&buf, entries)
		w.Header().Set("Content-Type", "application/json")
	} else {
		writeHTMLListing(&buf, "/"+p, entries)
		w.Header().Set("Content-Type", "text/html")
	}
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(buf.Bytes())
}

// writeJSONListing writes nginx's autoindex_format json.
func writeJSONListing(buf *bytes.Buffer, entries []entry) {
	buf.WriteString("[\n")
	for i, e := range entries {
		name, _ := json.Marshal(e.name)
		mtime := e.mtime.UTC().Format(http.TimeFormat)
		if e.isDir {
			fmt.Fprintf(buf, `{ "name":%s, "type":"directory", "mtime":"%s" }`, name, mtime)
		} else {
			fmt.Fprintf(buf, `{ "name":%s, "type":"file", "mtime":"%s", "size":%d }`, name, mtime, e.size)
		}
		if i < len(entries)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("]\n")
}

// nameColumn is the width nginx pads link text to before the date column.
const nameColumn = 50

// writeHTMLListing writes nginx's autoindex HTML with autoindex_exact_size on.
func writeHTMLListing(buf *bytes.Buffer, dir string, entries []entry) {
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	title := html.EscapeString(dir)
	fmt.Fprintf(buf, "<html>\n<head><title>Index of %s</title></head>\n<body>\n<h1>Index of %s</h1><hr><pre>", title, title)
	if dir != "/" {
		buf.WriteString(`<a href="../">../</a>` + "\n")
	}
	for _, e := range entries {
		// ':' is escaped too, so "a:b" is not read as a URL scheme.
		href := strings.ReplaceAll(url.PathEscape(e.name), ":", "%3A")
		text := e.name
		size := "-"
		if e.isDir {
			href += "/"
			text += "/"
		} else {
			size = fmt.Sprint(e.size)
		}
		pad := max(nameColumn-len([]rune(text)), 1)
		fmt.Fprintf(buf, "<a href=\"%s\">%s</a>%s%s %19s\n", html.EscapeString(href), html.EscapeString(text),
			strings.Repeat(" ", pad), e.mtime.UTC().Format("02-Jan-2006 15:04"), size)
	}
	buf.WriteString("</pre><hr></body>\n</html>\n")
}

package httpsrc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/playhead/playhead/source"
)

// parseListing reads the directory listing body served at base (the URL the listing
// came from, after redirects) with the given Content-Type. It understands nginx autoindex
// in HTML and JSON, Apache autoindex and Go's http.FileServer, and returns an error
// wrapping source.ErrNotDir for a body that is not a listing.
//
// Only links to direct children of base are entries: parent, sort (?C=N;O=D), fragment
// and other-host links are dropped, as are names that cannot be a path element.
// Names are unescaped and unique (the first link wins).
func parseListing(base *url.URL, contentType string, body []byte) ([]source.Entry, error) {
	switch listingFormat(contentType, body) {
	case formatJSON:
		return parseJSONListing(body)
	case formatHTML:
		return parseHTMLListing(base, body), nil
	}
	return nil, fmt.Errorf("%w: answer of type %q is not a listing", source.ErrNotDir, contentType)
}

type format int

const (
	formatNone format = iota
	formatHTML
	formatJSON
)

func listingFormat(contentType string, body []byte) format {
	if contentType == "" {
		// No type: guess as browsers do.
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			return formatJSON
		}
		return formatHTML
	}
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return formatNone
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return formatJSON
	case mt == "text/html" || mt == "application/xhtml+xml":
		return formatHTML
	}
	return formatNone
}

// jsonEntry is one element of an nginx autoindex_format json listing.
type jsonEntry struct {
	Name  string `json:"name"`
	Type  string `json:"type"` // "directory", "file" or "other"
	MTime string `json:"mtime"`
	Size  *int64 `json:"size"` // absent for directories
}

func parseJSONListing(body []byte) ([]source.Entry, error) {
	var items []jsonEntry
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("bad JSON listing: %w", err)
	}
	l := newListing()
	for _, it := range items {
		e := source.Entry{Name: it.Name, IsDir: it.Type == "directory", Version: source.AnyVersion}
		t, terr := http.ParseTime(it.MTime)
		switch {
		case e.IsDir:
			if terr == nil {
				e.ModTime = t // shown only: a directory's version is never compared
			}
		default:
			if it.Size != nil && *it.Size >= 0 {
				e.Version.Size = *it.Size
			}
			if terr == nil {
				e.Version.ModTime = t // exact to the second, as Last-Modified
			}
		}
		l.add(e)
	}
	return l.entries, nil
}

// listing collects unique, valid entries.
type listing struct {
	entries []source.Entry
	seen    map[string]bool
}

func newListing() *listing { return &listing{seen: make(map[string]bool)} }

func (l *listing) add(e source.Entry) {
	if !validName(e.Name) || l.seen[e.Name] {
		return
	}
	l.seen[e.Name] = true
	l.entries = append(l.entries, e)
}

// parseHTMLListing walks the tokens of an HTML listing. Each accepted <a href> opens an
// entry; the text after its </a> up to the next link or end of row/pre block holds the
// date and size in nginx and Apache listings:
//
//	<a href="f.mkv">f.mkv</a>   01-Jan-2024 10:00   20971520      nginx
//	<td><a href="f.mkv">f.mkv</a></td><td>2024-01-01 10:00</td><td>20M</td>   Apache
func parseHTMLListing(base *url.URL, body []byte) []source.Entry {
	l := newListing()
	var (
		cur      *source.Entry // link whose trailing text is being collected
		trailing []byte
		inLink   bool
	)
	finish := func() {
		if cur != nil {
			if !cur.IsDir {
				cur.Version.Size = sizeFromColumns(string(trailing))
			}
			cur.ModTime = timeFromColumns(string(trailing))
			l.add(*cur)
		}
		cur, trailing = nil, trailing[:0]
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			finish()
			return l.entries
		case html.StartTagToken, html.SelfClosingTagToken:
			tag, hasAttr := z.TagName()
			if string(tag) != "a" {
				continue
			}
			finish()
			inLink = true
			for hasAttr {
				var key, val []byte
				key, val, hasAttr = z.TagAttr()
				if string(key) == "href" {
					if name, isDir, ok := childOf(base, string(val)); ok {
						cur = &source.Entry{Name: name, IsDir: isDir, Version: source.AnyVersion}
					}
					break
				}
			}
		case html.EndTagToken:
			switch tag, _ := z.TagName(); string(tag) {
			case "a":
				inLink = false
			case "tr", "pre", "table", "li", "ul", "ol", "body":
				finish()
			}
		case html.TextToken:
			if cur != nil && !inLink {
				trailing = append(trailing, z.Text()...)
			}
		}
	}
}

// schemesNotFiles are URL schemes a listing's links use for things that are not files.
// Any other "scheme" in a relative link is a file name with a colon ("a:b.mkv").
var schemesNotFiles = map[string]bool{
	"mailto": true, "javascript": true, "data": true, "tel": true, "ftp": true, "file": true, "urn": true,
}

// childOf resolves href against the listing URL base and returns the name of the direct
// child it points to, and whether it is a directory (trailing slash).
func childOf(base *url.URL, href string) (name string, isDir bool, ok bool) {
	ref, err := url.Parse(href)
	if err != nil {
		return "", false, false
	}
	if ref.Scheme != "" && ref.Opaque != "" && !schemesNotFiles[strings.ToLower(ref.Scheme)] {
		if ref, err = url.Parse("./" + href); err != nil {
			return "", false, false
		}
	}
	if ref.RawQuery != "" || ref.ForceQuery || ref.Fragment != "" || ref.Opaque != "" {
		return "", false, false // sort links, anchors, mailto:
	}
	abs := base.ResolveReference(ref)
	if !strings.EqualFold(abs.Scheme, base.Scheme) || !strings.EqualFold(abs.Host, base.Host) {
		return "", false, false
	}
	dir := base.Path
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	rest, ok := strings.CutPrefix(abs.Path, dir)
	if !ok {
		return "", false, false
	}
	name, isDir = strings.CutSuffix(rest, "/")
	if !validName(name) {
		return "", false, false
	}
	return name, isDir, true
}

// sizeFromColumns finds the size in the text after a link: the column after the time of
// day ("10:00" or "10:00:37"). A plain number is an exact size in bytes; "20M", "1.2G",
// "-" or no such column mean unknown (-1).
func sizeFromColumns(text string) int64 {
	fields := strings.Fields(text)
	for i, f := range fields {
		if isClock(f) && i+1 < len(fields) {
			if n, ok := parseNonNeg(fields[i+1]); ok {
				return n
			}
			return -1
		}
	}
	return -1
}

// listingTimeLayouts are the date and time columns of the HTML listings playhead reads,
// to the minute or the second: nginx ("14-Mar-2024 09:12"), Apache ("2024-03-14 09:12")
// and lighttpd ("2024-Mar-14 09:12:31").
var listingTimeLayouts = []string{
	"02-Jan-2006 15:04", "2006-01-02 15:04", "2006-Jan-02 15:04",
	"02-Jan-2006 15:04:05", "2006-01-02 15:04:05", "2006-Jan-02 15:04:05",
}

// timeFromColumns finds the modification time in the text after a link: a date and the
// time of day after it. The listing names no time zone; it is taken as UTC, which is what
// nginx shows unless autoindex_localtime is on (Apache shows the server's local time).
// Zero when there is no such pair.
func timeFromColumns(text string) time.Time {
	fields := strings.Fields(text)
	for i := 1; i < len(fields); i++ {
		if !isClock(fields[i]) {
			continue
		}
		for _, layout := range listingTimeLayouts {
			if t, err := time.Parse(layout, fields[i-1]+" "+fields[i]); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// isClock reports whether f looks like hh:mm or hh:mm:ss.
func isClock(f string) bool {
	if len(f) != 5 && len(f) != 8 {
		return false
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if i%3 == 2 {
			if c != ':' {
				return false
			}
		} else if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

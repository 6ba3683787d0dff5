package httpsrc

import (
	"net/url"
	"strings"
	"testing"
)

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-0/1", "bytes 5-9/*", "bytes */100", "bytes 9-5/10", "bytes 0-9223372036854775807/*", "items 0-1/2", "bytes +1-2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, total, err := parseContentRange(s)
		if err != nil {
			return
		}
		if first == -1 {
			if last != -1 || total < 0 {
				t.Fatalf("%q: unsatisfied form gave %d-%d/%d", s, first, last, total)
			}
			return
		}
		if first < 0 || last < first || total < -1 || (total >= 0 && last >= total) {
			t.Fatalf("%q: accepted inconsistent %d-%d/%d", s, first, last, total)
		}
	})
}

func FuzzParseListing(f *testing.F) {
	f.Add([]byte(`<pre><a href="a.mkv">a.mkv</a> 01-Jan-2024 10:00 123`+"\n</pre>"), false)
	f.Add([]byte(`<table><tr><td><a href="d/">d/</a></td><td>2024-01-01 10:00</td><td>-</td></tr></table>`), false)
	f.Add([]byte(`[{"name":"a","type":"file","size":1,"mtime":"Mon, 01 Jan 2024 10:00:00 GMT"}]`), true)
	f.Add([]byte(`<a href="../x">`), false)
	base, _ := url.Parse("http://example.org/media/")
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		ct := "text/html"
		if isJSON {
			ct = "application/json"
		}
		entries, err := parseListing(base, ct, body)
		if err != nil {
			return
		}
		seen := make(map[string]bool)
		for _, e := range entries {
			if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") {
				t.Fatalf("bad name %q", e.Name)
			}
			if seen[e.Name] {
				t.Fatalf("duplicate name %q", e.Name)
			}
			seen[e.Name] = true
			if e.Version.Size < -1 {
				t.Fatalf("size %d", e.Version.Size)
			}
		}
	})
}

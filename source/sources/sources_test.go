package sources

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// opened records what a fake scheme's Open was given.
type opened struct {
	scheme, spec string
	o            Options
}

// fakeScheme returns a scheme that opens an empty in-memory source and records the
// call in *got.
func fakeScheme(name string, got *opened, prefixes ...string) Scheme {
	return Scheme{Name: name, Prefixes: prefixes, Summary: "a " + name + " thing",
		Open: func(spec string, o Options) (source.Source, error) {
			*got = opened{name, spec, o}
			return memsrc.New(), nil
		}}
}

// Every prefix, and a path without "://", goes to the scheme that declares it, with
// the spec whole and the I/O timeout passed on.
func TestOpenDispatchesByPrefix(t *testing.T) {
	var got opened
	local := fakeScheme("local", &got, "file://")
	local.Paths = true
	r, err := New(local, fakeScheme("web", &got, "http://", "https://"), fakeScheme("s3", &got, "s3://"))
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"http://h/a/":   "web",
		"https://h/a/":  "web",
		"s3://bucket/":  "s3",
		"file:///srv":   "local",
		"/srv/media":    "local",
		"relative/dir":  "local",
		"with:colon/ok": "local",
	} {
		got = opened{}
		if _, err := r.Open(spec, Options{IOTimeout: 7 * time.Second}); err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got.scheme != want || got.spec != spec || got.o.IOTimeout != 7*time.Second {
			t.Errorf("%s: opened %+v, want scheme %s with the spec and a 7s timeout", spec, got, want)
		}
		if s, _ := r.Lookup(spec); s.Name != want {
			t.Errorf("Lookup(%s) = %s, want %s", spec, s.Name, want)
		}
	}
}

// A spec no scheme takes fails with ErrUnknownScheme, naming the spec and what the
// registry does take; an empty one says what to give.
func TestOpenUnknownSchemeNamesTheSchemes(t *testing.T) {
	for _, spec := range []string{"ftp://h/x/", "HTTP://h/", "://nothing"} {
		_, err := Builtin.Open(spec, Options{})
		if !errors.Is(err, ErrUnknownScheme) {
			t.Fatalf("%s: err = %v, want ErrUnknownScheme", spec, err)
		}
		for _, want := range []string{spec, "a directory or file:// URL", "an http(s):// URL"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", spec, err, want)
			}
		}
	}
	_, err := Builtin.Open("", Options{})
	if err == nil || !strings.Contains(err.Error(), "empty source: give a directory or file:// URL, an http(s):// URL, an s3://BUCKET/PREFIX URL, an azblob://CONTAINER/PREFIX URL, or a gs://BUCKET/PREFIX URL") {
		t.Errorf("empty spec: err = %v", err)
	}
}

// A scheme's Params reach its Open with their defaults filled in; a setting no scheme
// declares is refused rather than ignored.
func TestOpenParams(t *testing.T) {
	var got opened
	s3 := fakeScheme("s3", &got, "s3://")
	s3.Params = []Param{{Name: "s3-region", Default: "eu-west-1"}, {Name: "s3-endpoint"}}
	r, err := New(s3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("s3://b/", Options{Params: map[string]string{"s3-endpoint": "http://minio:9000"}}); err != nil {
		t.Fatal(err)
	}
	if got.o.Param("s3-region") != "eu-west-1" || got.o.Param("s3-endpoint") != "http://minio:9000" {
		t.Errorf("params = %v, want the region's default and the endpoint given", got.o.Params)
	}
	_, err = r.Open("s3://b/", Options{Params: map[string]string{"s3-regoin": "x"}})
	if err == nil || !strings.Contains(err.Error(), `unknown source setting "s3-regoin"`) {
		t.Errorf("misspelt setting: err = %v", err)
	}
}

// New refuses registries whose schemes would be ambiguous or unreachable, naming the
// scheme at fault.
func TestNewRefusesConflicts(t *testing.T) {
	var got opened
	withParam := func(s Scheme, names ...string) Scheme {
		for _, n := range names {
			s.Params = append(s.Params, Param{Name: n})
		}
		return s
	}
	paths := func(s Scheme) Scheme { s.Paths = true; return s }
	a, b := fakeScheme("a", &got, "a://"), fakeScheme("b", &got, "b://")
	noOpen := a
	noOpen.Open = nil
	cases := []struct {
		name    string
		schemes []Scheme
		want    string
	}{
		{"same name", []Scheme{a, fakeScheme("a", &got, "c://")}, `scheme "a" registered twice`},
		{"same prefix", []Scheme{a, fakeScheme("b", &got, "a://")}, `prefix "a://" already taken`},
		{"prefix without ://", []Scheme{fakeScheme("a", &got, "a:")}, `prefix "a:" must be`},
		{"no prefix", []Scheme{fakeScheme("a", &got)}, "selects nothing"},
		{"two path schemes", []Scheme{paths(a), paths(b)}, `schemes "a" and "b" both open local paths`},
		{"no open", []Scheme{noOpen}, "has no Open"},
		{"bad name", []Scheme{fakeScheme("S-3", &got, "s3://")}, `scheme name "S-3"`},
		{"param not prefixed", []Scheme{withParam(a, "region")}, `parameter "region" must be named a-SETTING`},
		{"param twice", []Scheme{withParam(a, "a-x", "a-x")}, `parameter "a-x" declared twice`},
	}
	for _, c := range cases {
		_, err := New(c.schemes...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// The built-in schemes open what the mount command accepts: a directory as a path or
// file:// URL, an http(s) URL without I/O, and report a missing directory clearly.
func TestBuiltin(t *testing.T) {
	dir := t.TempDir()
	for _, spec := range []string{dir, "file://" + dir} {
		src, err := Builtin.Open(spec, Options{})
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if err := Probe(context.Background(), src); err != nil {
			t.Errorf("probe %s: %v", spec, err)
		}
	}
	if _, err := Builtin.Open(filepath.Join(dir, "nope"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: err = %v, want not exist", err)
	}
	origin := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer origin.Close()
	src, err := Builtin.Open(origin.URL+"/", Options{IOTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Probe(ctx, src); err != nil {
		t.Errorf("probe %s: %v", origin.URL, err)
	}
	if s, _ := Builtin.Lookup(origin.URL); s.Name != "http" {
		t.Errorf("Lookup(%s) = %q, want http", origin.URL, s.Name)
	}
}

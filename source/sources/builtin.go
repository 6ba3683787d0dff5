package sources

import (
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/source/localsrc"
)

// The schemes of this build. A new backend adds its Scheme here and to Builtin.
var (
	// HTTP reads a directory the server lists (nginx or Apache autoindex, Go's
	// http.FileServer) or a single file, with range requests.
	HTTP = Scheme{
		Name:     "http",
		Prefixes: []string{"http://", "https://"},
		Summary:  "an http(s):// URL",
		Open: func(spec string, o Options) (source.Source, error) {
			ho := httpsrc.DefaultOptions()
			if o.IOTimeout > 0 {
				ho.Timeout = o.IOTimeout
			}
			return httpsrc.New(spec, ho)
		},
	}
	// File reads a local directory, given as a path or a file:// URL.
	File = Scheme{
		Name:     "file",
		Prefixes: []string{"file://"},
		Paths:    true,
		Summary:  "a directory or file:// URL",
		Open:     func(spec string, _ Options) (source.Source, error) { return localsrc.New(spec) },
	}
)

// Builtin is the registry of every scheme this build opens; the command line builds
// its sources and source flags from it.
var Builtin = mustNew(File, HTTP)

func mustNew(schemes ...Scheme) *Registry {
	r, err := New(schemes...)
	if err != nil {
		panic(err)
	}
	return r
}

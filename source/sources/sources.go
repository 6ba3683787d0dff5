// Package sources turns a SOURCE argument ("https://host/films/", "file:///srv",
// "/srv/media") into a source.Source. It is the one place that knows every backend: each
// URL scheme is a Scheme value (its prefixes, its settings, its constructor) listed in
// Builtin, and the library's core (vfs, fetch) never imports a concrete backend.
//
// Adding a backend (s3://, gs://) is a new package under source/ and one Scheme in
// builtin.go; the command line binds the new scheme's Params as flags by itself.
//
// Traps: Open does no I/O for URLs, so a mistyped host or a refusing origin shows only at
// Probe; call Probe before mounting. A spec is matched by prefix, case-sensitively, as
// the backends parse it ("HTTP://" is not a known scheme).
package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/playhead/playhead/source"
)

// Scheme is one kind of SOURCE: the prefixes that select it and how to open it.
type Scheme struct {
	// Name names the scheme in errors, in flag names (its Params are --NAME-...) and
	// in the metrics' source label: short, lower case, stable ("http", "file").
	Name string
	// Prefixes are the spec prefixes that select the scheme, each ending in "://".
	Prefixes []string
	// Paths: the scheme also opens a spec without "://", a local path. At most one
	// scheme of a Registry has it.
	Paths bool
	// Summary says what the scheme takes, for "SOURCE is ..." in help and errors:
	// "an http(s):// URL".
	Summary string
	// Params are the scheme's own settings (endpoint, region, credentials file), given
	// on the command line as --NAME (each Name starts with the scheme's Name and "-").
	Params []Param
	// Open returns the source for spec, one of the scheme's prefixes followed by the
	// rest (or a path, for Paths). o.Params holds a value for every one of Params.
	Open func(spec string, o Options) (source.Source, error)
}

// Param is one setting of a scheme.
type Param struct {
	Name    string // flag name: the scheme's Name, "-", the setting ("s3-region")
	Default string // value when not given
	Usage   string // one line for --help
	// Bool: a yes/no setting; given as a bare flag (--s3-no-sign) it is "true".
	Bool bool
}

// Options are what a scheme's Open gets besides the spec.
type Options struct {
	// IOTimeout is the mount's I/O timeout (fetch.Options.IOTimeout, --io-timeout): a
	// source bounds its own requests (HEAD, listings) by it, so stat and readdir fail
	// as promptly as reads. Zero means the scheme's default.
	IOTimeout time.Duration
	// Params holds settings of the schemes by Param.Name. A missing one takes its
	// Default; a name no scheme of the Registry declares is an error.
	Params map[string]string
}

// Param returns the value of the named setting ("" when not set).
func (o Options) Param(name string) string { return o.Params[name] }

// Registry is a set of schemes with distinct names, prefixes and parameter names.
type Registry struct {
	schemes []Scheme
}

// New returns a registry of schemes, or an error naming the first conflict.
func New(schemes ...Scheme) (*Registry, error) {
	names, prefixes, params := map[string]bool{}, map[string]bool{}, map[string]bool{}
	paths := ""
	for _, s := range schemes {
		switch {
		case s.Name == "" || s.Name != strings.ToLower(s.Name) || strings.ContainsAny(s.Name, " -:/"):
			return nil, fmt.Errorf("sources: scheme name %q: want a short lower-case word", s.Name)
		case names[s.Name]:
			return nil, fmt.Errorf("sources: scheme %q registered twice", s.Name)
		case s.Open == nil:
			return nil, fmt.Errorf("sources: scheme %q has no Open", s.Name)
		case len(s.Prefixes) == 0 && !s.Paths:
			return nil, fmt.Errorf("sources: scheme %q selects nothing: no prefixes and not Paths", s.Name)
		case s.Paths && paths != "":
			return nil, fmt.Errorf("sources: schemes %q and %q both open local paths", paths, s.Name)
		}
		names[s.Name] = true
		if s.Paths {
			paths = s.Name
		}
		for _, p := range s.Prefixes {
			if !strings.HasSuffix(p, "://") || p == "://" {
				return nil, fmt.Errorf("sources: scheme %q: prefix %q must be a scheme followed by ://", s.Name, p)
			}
			if prefixes[p] {
				return nil, fmt.Errorf("sources: scheme %q: prefix %q already taken", s.Name, p)
			}
			prefixes[p] = true
		}
		for _, p := range s.Params {
			if !strings.HasPrefix(p.Name, s.Name+"-") || len(p.Name) == len(s.Name)+1 {
				return nil, fmt.Errorf("sources: scheme %q: parameter %q must be named %s-SETTING", s.Name, p.Name, s.Name)
			}
			if params[p.Name] {
				return nil, fmt.Errorf("sources: scheme %q: parameter %q declared twice", s.Name, p.Name)
			}
			params[p.Name] = true
		}
	}
	return &Registry{schemes: schemes}, nil
}

// Schemes returns the registry's schemes in the order given to New. The caller must
// not modify them.
func (r *Registry) Schemes() []Scheme { return r.schemes }

// ErrUnknownScheme: no scheme of the registry takes the spec.
var ErrUnknownScheme = errors.New("unsupported source")

// Lookup returns the scheme that opens spec. Its error for a spec no scheme takes
// wraps ErrUnknownScheme and says which ones there are.
func (r *Registry) Lookup(spec string) (Scheme, error) {
	if spec == "" {
		return Scheme{}, fmt.Errorf("playhead: empty source: give %s", r.Summary())
	}
	for _, s := range r.schemes {
		for _, p := range s.Prefixes {
			if strings.HasPrefix(spec, p) {
				return s, nil
			}
		}
	}
	if !strings.Contains(spec, "://") {
		for _, s := range r.schemes {
			if s.Paths {
				return s, nil
			}
		}
	}
	return Scheme{}, fmt.Errorf("playhead: %w %q: want %s", ErrUnknownScheme, spec, r.Summary())
}

// Open returns the source for spec from the scheme that takes it, with the defaults
// of that scheme's Params filled in. It does no I/O for URLs; see Probe.
func (r *Registry) Open(spec string, o Options) (source.Source, error) {
	s, err := r.Lookup(spec)
	if err != nil {
		return nil, err
	}
	if err := r.checkParams(o.Params); err != nil {
		return nil, err
	}
	params := make(map[string]string, len(s.Params))
	for _, p := range s.Params {
		params[p.Name] = p.Default
		if v, ok := o.Params[p.Name]; ok {
			params[p.Name] = v
		}
	}
	o.Params = params
	return s.Open(spec, o)
}

// checkParams refuses a setting no scheme declares: a typo would otherwise be ignored.
func (r *Registry) checkParams(given map[string]string) error {
	for name := range given {
		if !r.declares(name) {
			return fmt.Errorf("playhead: unknown source setting %q", name)
		}
	}
	return nil
}

func (r *Registry) declares(name string) bool {
	for _, s := range r.schemes {
		for _, p := range s.Params {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// Summary lists what the registry opens, for help and errors: "a directory or file://
// URL, or an http(s):// URL".
func (r *Registry) Summary() string {
	var parts []string
	for _, s := range r.schemes {
		parts = append(parts, s.Summary)
	}
	switch len(parts) {
	case 0:
		return "nothing (no schemes registered)"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + ", or " + parts[len(parts)-1]
}

// prober is implemented by sources that can check their origin up front.
type prober interface {
	Probe(ctx context.Context) error
}

// Probe checks that the origin answers, so that a mount fails at once with a clear
// message instead of mounting an empty tree. Sources without a probe list their root.
func Probe(ctx context.Context, src source.Source) error {
	if p, ok := src.(prober); ok {
		return p.Probe(ctx)
	}
	if _, err := src.List(ctx, ""); err != nil {
		return fmt.Errorf("playhead: cannot list %s: %w", src, err)
	}
	return nil
}

package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ModulePath is the module whose source tree CheckFresh looks for.
const ModulePath = "github.com/playhead/playhead"

// ErrStale says the binary under test was built before its source tree last changed.
var ErrStale = errors.New("the binary is older than the source tree")

// StaleError is CheckFresh's error for a stale binary; it wraps ErrStale.
type StaleError struct {
	Built   time.Time // the binary's build time
	Newest  string    // the newest source file, relative to the module root
	ModTime time.Time // its modification time
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("%v: %s; run `make build` (or pass --allow-stale)", ErrStale, e.Detail())
}

// Detail says what is newer than what, for a report's header.
func (e *StaleError) Detail() string {
	return fmt.Sprintf("built %s, but %s was modified %s", e.Built.UTC().Format(time.RFC3339), e.Newest,
		e.ModTime.UTC().Format(time.RFC3339))
}

func (e *StaleError) Unwrap() error { return ErrStale }

// buildTimeSlack covers the build stamp's whole seconds: a file saved in the same second
// as the stamp is not newer than the build.
const buildTimeSlack = time.Second

// CheckFresh compares built, when the binary under test was built, with the newest
// non-test Go file of the playhead module found from dir upwards. It returns a line for
// the report's header, and an error wrapping ErrStale when a source file is newer. No
// source tree found is not an error (a binary run elsewhere); the line says so.
func CheckFresh(built time.Time, dir string) (string, error) {
	root, ok := findModule(dir)
	if !ok {
		return fmt.Sprintf("not checked: no %s source tree at or above %s", ModulePath, dir), nil
	}
	newest, newestPath, err := newestGoFile(root)
	if err != nil {
		return "", fmt.Errorf("check freshness: %w", err)
	}
	if newestPath == "" {
		return fmt.Sprintf("not checked: no Go files under %s", root), nil
	}
	rel, _ := filepath.Rel(root, newestPath)
	if newest.After(built.Add(buildTimeSlack)) {
		return "", &StaleError{Built: built, Newest: rel, ModTime: newest}
	}
	return fmt.Sprintf("built after the newest source file (%s, %s)", rel, newest.UTC().Format(time.RFC3339)), nil
}

// findModule walks up from dir to the directory whose go.mod declares ModulePath.
func findModule(dir string) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func modulePathOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// newestGoFile returns the newest modification time among the Go files that go into
// the binary: test files, testdata and hidden directories are skipped.
func newestGoFile(root string) (time.Time, string, error) {
	var newest time.Time
	var newestPath string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.ModTime().After(newest) {
			newest, newestPath = fi.ModTime(), p
		}
		return nil
	})
	return newest, newestPath, err
}

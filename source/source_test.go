package source

import (
	"testing"
	"time"
)

func TestVersionSame(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		a, b Version
		want bool
	}{
		{"equal strong ETags", Version{Size: 1, ETag: `"a"`}, Version{Size: 1, ETag: `"a"`}, true},
		{"other ETag", Version{Size: 1, ETag: `"a"`}, Version{Size: 1, ETag: `"b"`}, false},
		{"weak ETags never vouch", Version{Size: 1, ETag: `W/"a"`}, Version{Size: 1, ETag: `W/"a"`}, false},
		{"other size", Version{Size: 1, ETag: `"a"`}, Version{Size: 2, ETag: `"a"`}, false},
		{"equal times, no ETags", Version{Size: 1, ModTime: t0}, Version{Size: 1, ModTime: t0}, true},
		{"an ETag on one side only", Version{Size: 1, ModTime: t0, ETag: `"a"`}, Version{Size: 1, ModTime: t0}, false},
		{"sizes only", Version{Size: 1}, Version{Size: 1}, false},
		{"unknown size", Version{Size: -1, ETag: `"a"`}, Version{Size: -1, ETag: `"a"`}, false},
	} {
		if got := c.a.Same(c.b); got != c.want {
			t.Errorf("%s: Same = %v, want %v", c.name, got, c.want)
		}
		if got := c.b.Same(c.a); got != c.want {
			t.Errorf("%s (swapped): Same = %v, want %v", c.name, got, c.want)
		}
	}
}

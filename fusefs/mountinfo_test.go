package fusefs

import "testing"

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/tmp/a\040b`: "/tmp/a b", `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsMounted(t *testing.T) {
	if !IsMounted("/") || IsMounted(t.TempDir()) {
		t.Errorf("IsMounted: / %v, a new temporary directory %v; want true, false", IsMounted("/"), IsMounted(t.TempDir()))
	}
}

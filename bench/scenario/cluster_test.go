package scenario

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// fakeCluster is a ClusterEnv whose ring is a table: owners[path][stripe].
type fakeCluster struct {
	nodes  int
	stripe int64
	owners map[string][]int
}

func (f *fakeCluster) Nodes() int                                          { return f.nodes }
func (f *fakeCluster) Mountpoint(int) string                               { return "" }
func (f *fakeCluster) Kill(int) error                                      { return nil }
func (f *fakeCluster) Restart(context.Context, int, bool, ...string) error { return nil }
func (f *fakeCluster) Owner(p string, off int64) (int, error)              { return f.owners[p][off/f.stripe], nil }
func (f *fakeCluster) StripeSize() int64                                   { return f.stripe }
func (f *fakeCluster) OriginBytes() int64                                  { return 0 }
func (f *fakeCluster) ResetOrigin()                                        {}
func (f *fakeCluster) DirectURL() string                                   { return "" }

func TestPeerOnlyFilesAndBusiestOwnerFollowTheRing(t *testing.T) {
	s := ClusterSizes{Nodes: 3, Files: 3, FileSize: 30}
	files := ClusterFiles(s)
	names := sortedNames(files)
	env := &fakeCluster{nodes: 3, stripe: 10, owners: map[string][]int{
		names[0]: {0, 2, 2},
		names[1]: {1, 0, 2}, // node 1 owns a stripe: not peer-only for node 1
		names[2]: {2, 2, 0},
	}}
	got, err := peerOnlyFiles(env, files, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{names[0], names[2]}; !slices.Equal(got, want) {
		t.Errorf("peerOnlyFiles(node 1) = %v, want %v", got, want)
	}
	// Node 2 owns most stripes, but it is the reader: the busiest other owner is node 0.
	if v, err := busiestOwner(env, names, files, 2); err != nil || v != 0 {
		t.Errorf("busiestOwner(reader 2) = %d, %v; want node 0", v, err)
	}
	if v, _ := busiestOwner(env, names, files, 1); v != 2 {
		t.Errorf("busiestOwner(reader 1) = %d, want node 2", v)
	}
}

func TestClusterPrintMarksMissedTargets(t *testing.T) {
	fig := ClusterFigures{Sizes: QuickCluster(), OriginFactor: 1.2, PeerRate: 900e6, CeilingRate: 1000e6, Done: 3}
	var b strings.Builder
	if err := fig.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		missed := strings.Contains(line, "MISSED")
		switch {
		case strings.Contains(line, "origin bytes / set") && !missed:
			t.Errorf("an origin factor of 1.2 is not marked missed: %q", line)
		case strings.Contains(line, "copy / ceiling") && missed:
			t.Errorf("90%% of the ceiling is marked missed: %q", line)
		}
	}
}

// A step that failed ends the table with a missed "not completed" line: the zero
// figures of the steps after it (no freeze, no failed play) are not printed as met.
func TestClusterPrintStopsAtAStepNotCompleted(t *testing.T) {
	for done, want := range []string{"(a)", "(b)", "(c) and (d)"} {
		var b strings.Builder
		if err := (ClusterFigures{Sizes: QuickCluster(), Done: done}).Print(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.Contains(out, want+"  ") || !strings.Contains(out, "not completed") || !strings.Contains(out, "MISSED") {
			t.Errorf("Done %d: the table does not end at %s with a missed line:\n%s", done, want, out)
		}
		if strings.Contains(out, "failed plays") {
			t.Errorf("Done %d: the players' zero figures are printed:\n%s", done, out)
		}
	}
}

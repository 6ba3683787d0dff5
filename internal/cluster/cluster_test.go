package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The membership is read from the daemon's log lines of its current run only: a join
// logged before a restart does not count, and a later leave removes the node.
func TestMembersFollowTheCurrentRunsLog(t *testing.T) {
	n := &Node{LogPath: filepath.Join(t.TempDir(), "daemon.log")}
	old := `time=x level=INFO msg="peer joined" node=127.0.0.99:7946 addr=127.0.0.99:7947` + "\n"
	cur := `time=x level=INFO msg="peer joined" node=127.0.0.10:7946 addr=127.0.0.10:7947
time=x level=INFO msg="peer joined" node=127.0.0.11:7946 addr=127.0.0.11:7947
time=x level=INFO msg="peer joined" node=127.0.0.12:7946 addr=127.0.0.12:7947
time=x level=INFO msg="peer left" node=127.0.0.11:7946
time=x level=INFO msg="peer left" node=127.0.0.12:7946
time=x level=INFO msg="peer joined" node=127.0.0.12:7946 addr=127.0.0.12:7947
`
	if err := os.WriteFile(n.LogPath, []byte(old+cur), 0o644); err != nil {
		t.Fatal(err)
	}
	n.logFrom = int64(len(old))
	got, err := n.members()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.10:7946", "127.0.0.12:7946"}; !slices.Equal(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
}

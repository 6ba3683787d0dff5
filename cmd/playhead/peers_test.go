package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// runPeers runs `playhead peers` in-process and returns its output and error.
func runPeers(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := peersCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// `playhead peers` asks a running node (its real peer tier, a static list of two) for
// its view: the table names both members, the JSON decodes; a wrong secret, a closed
// port and a bad address each fail with an error that says which.
func TestPeersCommand(t *testing.T) {
	dir := t.TempDir()
	good, wrong := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	os.WriteFile(good, []byte("a-long-enough-cluster-secret\n"), 0o600)
	os.WriteFile(wrong, []byte("another-cluster-secret-entirely\n"), 0o600)
	p := peerFlags{peers: []string{"127.0.0.1:1"}, http: "127.0.0.1:0", secretFile: good}
	tier, err := p.start(memsrc.New(), "mem:", 256<<10, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	o := vfs.DefaultOptions()
	o.Cache.Dir = t.TempDir()
	fsys, err := vfs.New(tier.src, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.stop(); fsys.Close() })
	if err := tier.serve(fsys); err != nil {
		t.Fatal(err)
	}
	addr := tier.ln.Addr().String()

	out, err := runPeers(t, addr, "--peer-secret-file", good)
	if err != nil {
		t.Fatalf("peers: %v", err)
	}
	t.Logf("playhead peers %s:\n%s", addr, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "MEMBER") ||
		!strings.Contains(lines[1], "127.0.0.1:0 (self)") || !strings.Contains(lines[2], "127.0.0.1:1") ||
		!strings.Contains(lines[2], "static") || !strings.Contains(out, "refused 0 requests") {
		t.Errorf("table:\n%s\nwant a header, self, the static peer, and the totals", out)
	}

	out, err = runPeers(t, addr, "--peer-secret-file", good, "--json")
	var v peerserve.MembersView
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.Members) != 2 || v.Self != "127.0.0.1:0" {
		t.Errorf("--json: %v\n%s\nwant the view of two members", err, out)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{addr, "--peer-secret-file", wrong}, "refused our signature: is --peer-secret-file the cluster's?"},
		{[]string{closed, "--peer-secret-file", good}, "cannot reach the peer endpoint at " + closed},
		{[]string{"no-port", "--peer-secret-file", good}, "bad address"},
	} {
		if _, err := runPeers(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.want)
		}
	}
	if st := tier.handler.Stats(); st.Unauthorized != 1 {
		t.Errorf("server stats %+v: want the wrong secret's request counted as a 401", st)
	}
}

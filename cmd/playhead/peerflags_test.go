package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playhead/playhead/source/memsrc"
)

// Wrong combinations and addresses of the peer flags fail with the flag's name.
func TestPeerFlagsCheck(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error; "" means valid
	}{
		{nil, ""},
		{[]string{"--peer-listen", "10.0.0.5:7946", "--join", "10.0.0.4:7946", "--peer-secret-file", "s"}, ""},
		{[]string{"--peers", "10.0.0.4:7947,10.0.0.6:7947", "--peer-http", "10.0.0.5:7947", "--peer-secret-file", "s"}, ""},
		{[]string{"--peer-listen", "10.0.0.5:7946"}, "--peer-secret-file"},
		{[]string{"--join", "10.0.0.4:7946"}, "need --peer-listen"},
		{[]string{"--peer-listen", "10.0.0.5:7946", "--peers", "10.0.0.4:7947", "--peer-secret-file", "s"}, "choose one"},
		{[]string{"--peers", "10.0.0.4:7947", "--peer-secret-file", "s"}, "--peer-http"},
		{[]string{"--peer-listen", "0.0.0.0:7946", "--peer-secret-file", "s"}, "wildcard"},
		{[]string{"--peer-listen", "10.0.0.5", "--peer-secret-file", "s"}, "bad --peer-listen"},
		{[]string{"--peer-listen", "10.0.0.5:99999", "--peer-secret-file", "s"}, "port"},
		{[]string{"--peer-listen", "10.0.0.5:7946", "--join", "nowhere", "--peer-secret-file", "s"}, "bad --join"},
	} {
		err := parseMountFlags(t, c.args...).peer.check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}

// A missing or short secret file fails the start, and the error never shows the secret.
func TestPeerSecretFile(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("hunter2"), 0o600)
	log := slog.New(slog.DiscardHandler)
	for _, file := range []string{filepath.Join(dir, "missing"), short} {
		p := peerFlags{peers: []string{"127.0.0.1:1"}, http: "127.0.0.1:0", secretFile: file}
		_, err := p.start(memsrc.New(), "mem:", 256<<10, log)
		if err == nil || !strings.Contains(err.Error(), "--peer-secret-file") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error %v", file, err)
		}
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("a-long-enough-cluster-secret\n"), 0o600)
	p := peerFlags{peers: []string{"127.0.0.1:1"}, http: "127.0.0.1:0", secretFile: good}
	tier, err := p.start(memsrc.New(), "mem:", 256<<10, log)
	if err != nil {
		t.Fatal(err)
	}
	tier.stop()
}

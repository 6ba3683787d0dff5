package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/fusefs"
)

// --uid, --gid and --umask reach the mount's Owner; left out, they are the user running
// the command and 022.
func TestOwnerFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want func() fusefs.Owner
	}{
		{nil, fusefs.DefaultOwner},
		{[]string{"--uid", "1234", "--gid", "5678", "--umask", "027"},
			func() fusefs.Owner { return fusefs.Owner{UID: 1234, GID: 5678, Umask: 0o27} }},
		{[]string{"--uid=0", "--gid=0", "--umask=0o077"},
			func() fusefs.Owner { return fusefs.Owner{UID: 0, GID: 0, Umask: 0o77} }},
	} {
		var m mountFlags
		cmd := &cobra.Command{}
		m.bind(cmd)
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		got, err := m.owner()
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if want := c.want(); *got != want {
			t.Errorf("%q: owner %+v, want %+v", c.args, *got, want)
		}
	}
}

// Bad ownership flags end the command before it probes the origin or mounts.
func TestBadOwnerFlags(t *testing.T) {
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "cache")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--umask", "9"}, "--umask"},
		{[]string{"--umask", "1777"}, "--umask"},
		{[]string{"--umask", "rwx"}, "--umask"},
		{[]string{"--uid", "-1"}, "--uid"},
		{[]string{"--gid", "root"}, "--gid"},
	} {
		args := append(append([]string{"mount", "--cache-dir", cache}, c.args...), "http://127.0.0.1:1/", tmp)
		code, stderr, took := runCLI(t, nil, args...)
		t.Logf("%q: exit %d after %v: %s", c.args, code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
		checkOneLineError(t, code, stderr, c.want)
		if strings.Contains(stderr, "unreachable") {
			t.Errorf("%q: the origin was probed before the flags were checked", c.args)
		}
	}
}

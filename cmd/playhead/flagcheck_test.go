package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// parseMountFlags binds the mount flags and parses args as the command line would.
func parseMountFlags(t *testing.T, args ...string) *mountFlags {
	t.Helper()
	var m mountFlags
	cmd := &cobra.Command{}
	m.bind(cmd)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return &m
}

// The values just inside the accepted ranges work, and --cache-direct-io reaches the
// options it stands for.
func TestMountFlagEdges(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--read-ahead", "256KiB"}, true}, // one block: the smallest window
		{[]string{"--read-ahead", "255KiB"}, false},
		{[]string{"--read-ahead", "0", "--cache-size", "1MiB"}, true}, // off: no cache needed for it
		{[]string{"--cache-size", "258MiB"}, true},                    // 4 x (64 MiB + 512 KiB)
		{[]string{"--cache-size", "257MiB"}, false},
		{[]string{"--cache-size", "10MiB", "--read-ahead", "2MiB"}, true},
	} {
		_, err := parseMountFlags(t, c.args...).options()
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.args, err, c.ok)
		}
	}
	for _, c := range []struct {
		value           string
		buffered, force bool
		rate            float64 // DirectWriteRate: negative is never
	}{
		{"auto", false, false, 200e6},
		{"on", false, true, 200e6},
		{"off", true, false, -1},
	} {
		o, err := parseMountFlags(t, "--cache-direct-io", c.value).options()
		if err != nil {
			t.Fatal(err)
		}
		if o.Cache.BufferedIO != c.buffered || o.Fetch.ForceDirectWrites != c.force || o.Fetch.DirectWriteRate != c.rate {
			t.Errorf("--cache-direct-io %s: BufferedIO %v ForceDirectWrites %v DirectWriteRate %v; want %v %v %v",
				c.value, o.Cache.BufferedIO, o.Fetch.ForceDirectWrites, o.Fetch.DirectWriteRate, c.buffered, c.force, c.rate)
		}
	}
}

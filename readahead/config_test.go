package readahead

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		err    string // substring; "" means valid
	}{
		{"default", func(*Config) {}, ""},
		{"read-ahead disabled ignores initial", func(c *Config) { c.MaxWindow, c.InitialWindow = 0, 0 }, ""},
		{"zero trigger, seek fetch and slack are settings", func(c *Config) { c.Trigger, c.SeekFetch, c.Slack = 0, 0, 0 }, ""},
		{"block below a page", func(c *Config) { c.BlockSize = 512 }, "block size"},
		{"zero block", func(c *Config) { c.BlockSize = 0 }, "block size"},
		{"negative seek fetch", func(c *Config) { c.SeekFetch = -1 }, "seek fetch"},
		{"negative trigger", func(c *Config) { c.Trigger = -1 }, "trigger"},
		{"negative max window", func(c *Config) { c.MaxWindow = -1 }, "max window"},
		{"initial above max", func(c *Config) { c.InitialWindow = c.MaxWindow + 1 }, "initial window"},
		{"zero initial", func(c *Config) { c.InitialWindow = 0 }, "initial window"},
		{"initial below a block", func(c *Config) { c.InitialWindow = c.BlockSize - 1 }, "initial window"},
		{"negative slack", func(c *Config) { c.Slack = -1 }, "slack"},
		{"zero runs", func(c *Config) { c.MaxRuns = 0 }, "max runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.err)
			}
		})
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted an invalid config")
		}
	}()
	New(Config{}, 1<<20)
}

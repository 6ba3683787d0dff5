package kernlink

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProfiles(t *testing.T) {
	far, ok := Profile("Far-Shared")
	if !ok || far.RTT != 200*time.Millisecond || far.Bandwidth != 30_000_000 || far.PerConnBandwidth != 0 {
		t.Errorf("far-shared = %+v, %v; want 200ms, 30 MB/s shared, no per-connection cap", far, ok)
	}
	cloud, ok := Profile(ProfileCloudKernel)
	if !ok || cloud.RTT != 40*time.Millisecond || cloud.PerConnBandwidth != 25_000_000 || cloud.Bandwidth < 10*cloud.PerConnBandwidth {
		t.Errorf("cloud-kernel = %+v, %v; want 40ms, 25 MB/s per connection, a pipe for ten of them", cloud, ok)
	}
	if _, ok := Profile("far"); ok {
		t.Error(`"far" is linkemu's, not a kernel-shaped profile`)
	}
	if got := ProfileNames(); !slices.Equal(got, []string{"cloud-kernel", "far-shared"}) {
		t.Errorf("ProfileNames = %v", got)
	}
	for _, n := range ProfileNames() {
		o, _ := Profile(n)
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{RTT: -time.Millisecond, Bandwidth: 1}, "RTT"},
		{Options{}, "Bandwidth"},
		{Options{Bandwidth: 1, PerConnBandwidth: -1}, "PerConnBandwidth"},
		{Options{Bandwidth: 1, MTU: 100}, "MTU"},
		{Options{Bandwidth: 1, MTU: 70000}, "MTU"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error about %s", tc.o, err, tc.want)
		}
	}
	if err := (Options{Bandwidth: 1}).Validate(); err != nil {
		t.Errorf("a rate alone is a link: %v", err)
	}
}

func TestString(t *testing.T) {
	o, _ := Profile(ProfileCloudKernel)
	s := o.String()
	for _, want := range []string{"rtt 40ms", "250.0 MB/s shared (tbf)", "25.0 MB/s per connection", "MTU 9001"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want %q in it", s, want)
		}
	}
}

func TestStalePID(t *testing.T) {
	for name, want := range map[string]int{"phbench-123-1": 123, "phbench-9-77": 9} {
		if pid, ok := stalePID(name); !ok || pid != want {
			t.Errorf("stalePID(%q) = %d, %v; want %d", name, pid, ok, want)
		}
	}
	for _, name := range []string{"phs3", "phbench-", "phbench-x-1", "phbench-12", "phbench-0-1", "other-1-1"} {
		if pid, ok := stalePID(name); ok {
			t.Errorf("stalePID(%q) = %d: another tool's namespace would be deleted", name, pid)
		}
	}
}

func TestTbfArgs(t *testing.T) {
	got := strings.Join(tbfArgs("dev0", 30_000_000), " ")
	if want := "qdisc replace dev dev0 root tbf rate 240000000bit burst 65536 latency 50ms"; got != want {
		t.Errorf("tbf for 30 MB/s: %q, want %q", got, want)
	}
	if b := tbfBurst(250_000_000); b != 500_000 {
		t.Errorf("burst at 250 MB/s = %d, want 2 ms of it, 500000", b)
	}
}

package readahead

import "testing"

func TestProbesRemembersRecentProbesOfAKind(t *testing.T) {
	pr := NewProbes(DefaultConfig()) // HeadFetchMax 1 MiB, TailMax 8 MiB
	if got := pr.Ends(".mkv"); got != (Ends{}) {
		t.Fatalf("empty memory: %+v, want nothing", got)
	}
	pr.Record(".mkv", Ends{Head: 600 << 10, Tail: 64 << 10})
	pr.Record(".mp4", Ends{Head: 160 << 10, Tail: 2 << 20})
	if got, want := pr.Ends(".mkv"), (Ends{Head: 600 << 10, Tail: 64 << 10}); got != want {
		t.Errorf(".mkv: %+v, want %+v (its only probe)", got, want)
	}
	if got, want := pr.Ends(".mp4"), (Ends{Head: 160 << 10, Tail: 2 << 20}); got != want {
		t.Errorf(".mp4: %+v, want %+v (kinds are apart)", got, want)
	}
	// An end read on past four times its cap is a stream, not a header: ignored, and
	// the other end of the same probe still counts.
	pr.Record(".mkv", Ends{Head: 50 << 20, Tail: 100 << 10})
	if got, want := pr.Ends(".mkv"), (Ends{Head: 600 << 10, Tail: 100 << 10}); got != want {
		t.Errorf(".mkv after a stream from its head: %+v, want %+v", got, want)
	}
	pr.Record(".mp4", Ends{Tail: 40 << 20})
	if got := pr.Ends(".mp4").Tail; got != 2<<20 {
		t.Errorf(".mp4 after a player read its last 40 MiB: tail %d, want 2 MiB", got)
	}
	// A long header counts as its cap, and is forgotten after probeMemory probes.
	pr.Record(".mkv", Ends{Head: 3 << 20})
	if got := pr.Ends(".mkv").Head; got != 1<<20 {
		t.Errorf(".mkv after a 3 MiB header: head %d, want 1 MiB", got)
	}
	for range probeMemory {
		pr.Record(".mkv", Ends{Head: 200 << 10})
	}
	if got := pr.Ends(".mkv").Head; got != 200<<10 {
		t.Errorf(".mkv after %d probes of 200 KiB: head %d, want 200 KiB", probeMemory, got)
	}
	pr.Record(".mkv", Ends{})
	if got := pr.Ends(".mkv").Head; got != 200<<10 {
		t.Errorf("an empty probe changed the head to %d", got)
	}
}

func TestProbesBoundsItsKinds(t *testing.T) {
	pr := NewProbes(DefaultConfig())
	for i := range maxProbeKinds + 1 {
		pr.Record(string(rune('a'+i%26))+string(rune(i)), Ends{Head: 600 << 10})
	}
	pr.mu.Lock()
	n := len(pr.kinds)
	pr.mu.Unlock()
	if n > maxProbeKinds {
		t.Errorf("%d kinds remembered, want at most %d", n, maxProbeKinds)
	}
}

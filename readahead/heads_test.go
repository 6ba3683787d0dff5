package readahead

import "testing"

func TestHeadsRemembersRecentProbesOfAKind(t *testing.T) {
	h := NewHeads(DefaultConfig()) // HeadFetchMax 1 MiB
	if got := h.Head(".mkv"); got != 0 {
		t.Fatalf("empty memory: head %d, want 0", got)
	}
	h.Record(".mkv", 600<<10)
	h.Record(".mp4", 160<<10)
	if got := h.Head(".mkv"); got != 600<<10 {
		t.Errorf(".mkv: head %d, want 600 KiB (its only probe)", got)
	}
	if got := h.Head(".mp4"); got != 160<<10 {
		t.Errorf(".mp4: head %d, want 160 KiB (kinds are apart)", got)
	}
	// A probe that read on past 4 MiB is a stream from the head, not a header: ignored.
	h.Record(".mkv", 50<<20)
	if got := h.Head(".mkv"); got != 600<<10 {
		t.Errorf(".mkv after a stream from its head: head %d, want 600 KiB", got)
	}
	// A long header counts as HeadFetchMax, and is forgotten after headMemory probes.
	h.Record(".mkv", 3<<20)
	if got := h.Head(".mkv"); got != 1<<20 {
		t.Errorf(".mkv after a 3 MiB header: head %d, want 1 MiB", got)
	}
	for range headMemory {
		h.Record(".mkv", 200<<10)
	}
	if got := h.Head(".mkv"); got != 200<<10 {
		t.Errorf(".mkv after %d probes of 200 KiB: head %d, want 200 KiB", headMemory, got)
	}
	h.Record(".mkv", 0)
	if got := h.Head(".mkv"); got != 200<<10 {
		t.Errorf("an empty probe changed the head to %d", got)
	}
}

func TestHeadsBoundsItsKinds(t *testing.T) {
	h := NewHeads(DefaultConfig())
	for i := range maxHeadKinds + 1 {
		h.Record(string(rune('a'+i%26))+string(rune(i)), 600<<10)
	}
	h.mu.Lock()
	n := len(h.kinds)
	h.mu.Unlock()
	if n > maxHeadKinds {
		t.Errorf("%d kinds remembered, want at most %d", n, maxHeadKinds)
	}
}

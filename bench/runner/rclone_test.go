package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRcloneDetectsChunkStreams: an rclone whose help lacks --vfs-read-chunk-streams
// (Debian's v1.60) is found, its version recorded, and its tuned column says it reads
// one stream; one that has it gets the flag where it pays.
func TestRcloneDetectsChunkStreams(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "rclone-old")
	script := "#!/bin/sh\ncase \"$1\" in version) echo 'rclone v1.60.1-DEV'; echo '- os/version: x';; *) echo '--vfs-read-ahead SizeSuffix';; esac\n"
	if err := os.WriteFile(old, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := FindRclone(old, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "rclone v1.60.1-DEV" || r.ChunkStreams {
		t.Errorf("found %+v, want v1.60.1 without chunk streams", r)
	}
	tuned := RcloneSystems(r, nil, "cloud", OriginBuiltin, nil)[1]
	if !strings.Contains(tuned.Info.Note, "no "+chunkStreamsFlag) || strings.Contains(tuned.Info.Command, chunkStreamsFlag) {
		t.Errorf("tuned column for an old rclone: %+v", tuned.Info)
	}

	r.ChunkStreams = true
	if f := r.TunedFlags("cloud"); !slices.Contains(f, chunkStreamsFlag) {
		t.Errorf("cloud flags %q lack chunk streams", f)
	}
	if f := r.TunedFlags("far"); slices.Contains(f, chunkStreamsFlag) || !slices.Contains(f, "full") {
		t.Errorf("far flags %q", f)
	}

	if _, err := FindRclone(filepath.Join(dir, "nowhere"), ""); err == nil || !strings.Contains(err.Error(), "make bench-deps") {
		t.Errorf("missing rclone: %v", err)
	}
	missing := RcloneSystems(Rclone{}, os.ErrNotExist, "far", OriginBuiltin, nil)
	if len(missing) != 2 || missing[0].Info.Unavailable == "" || missing[1].SUT != nil {
		t.Errorf("missing rclone's columns: %+v", missing)
	}
}

package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
)

// requireMinIO returns the MinIO binary, or skips the test with the reason; with
// PLAYHEAD_REQUIRE_OBJSTORE=1 a missing MinIO fails it instead.
func requireMinIO(t *testing.T) string {
	t.Helper()
	bin, err := FindMinIO("")
	if err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_OBJSTORE") == "1" {
			t.Fatalf("MinIO required (PLAYHEAD_REQUIRE_OBJSTORE=1): %v", err)
		}
		t.Skipf("no MinIO here: %v", err)
	}
	return bin
}

// TestS3Origin runs tiny thumbs, bulk and rewatch cases from MinIO through the link:
// playhead's engine reading the bucket through the S3 API, and the HTTP ceilings reading
// presigned URLs. MinIO's own counts must be exact for the ceilings (seeding and the
// mounts' start-up are not in them), and 0 bytes for the second play of rewatch; MinIO
// must be stopped and its data removed at the end.
func TestS3Origin(t *testing.T) {
	requireMinIO(t)
	cases, err := scenario.Cases([]string{"thumbs", "bulk", "rewatch"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, cases, nil)
	cfg.Origin, cfg.Trials = OriginS3, 1
	cfg.Systems = []System{{Info: report.System{Name: "playhead", Kind: report.KindSUT}, SUT: engineSUT{}},
		HTTPOneConnSystem(), HTTPParallelSystem()}
	start := time.Now()
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report.Print(&out, rep)
	t.Logf("%.1f s\n%s", time.Since(start).Seconds(), out.String())
	if !strings.Contains(rep.Header.Origin, "MinIO") || !strings.Contains(rep.Header.Origin, minioRequestsTotal) {
		t.Errorf("origin %q does not name MinIO and its counters", rep.Header.Origin)
	}
	const probe = 64 << 10
	for _, c := range rep.Cases {
		if c.Failed() {
			t.Errorf("%s [%s] failed: %+v", c.Name, c.System, c.Trials)
			continue
		}
		if c.NotApplicable != "" {
			continue
		}
		f := c.Trials[0].Figures
		switch {
		case c.Scenario == "thumbs" && c.System == "http 1 conn":
			// Three files, a bounded range at each end of each: six GETs of 64 KiB.
			if f[scenario.FigOriginBytes] != 3*2*probe || f[scenario.FigOriginRequests] != 6 || f[scenario.FigNewConns] != 0 {
				t.Errorf("MinIO's counts for the probes: %v bytes, %v requests, %v new conns",
					f[scenario.FigOriginBytes], f[scenario.FigOriginRequests], f[scenario.FigNewConns])
			}
			if down := f[scenario.FigLinkBytesDown]; down <= 3*2*probe || down > 3*2*probe+6*2048 {
				t.Errorf("the link carried %v bytes for %d bytes of bodies in 6 responses", down, 3*2*probe)
			}
		case c.Scenario == "bulk" && c.System == "http 16 conns":
			// 3 MiB is one 4 MiB chunk: one ranged GET of a presigned URL.
			if f[scenario.FigOriginBytes] != 3<<20 || f[scenario.FigOriginRequests] != 1 {
				t.Errorf("MinIO's counts for the parallel ceiling: %v bytes in %v requests",
					f[scenario.FigOriginBytes], f[scenario.FigOriginRequests])
			}
		case c.Scenario == "rewatch":
			if f[scenario.FigOriginBytes] != 0 || f[scenario.FigLinkBytesDown] != 0 {
				t.Errorf("rewatch from MinIO: %v bytes by MinIO's count, %v down the link, on the second play",
					f[scenario.FigOriginBytes], f[scenario.FigLinkBytesDown])
			}
		case c.Scenario == "thumbs":
			if f[scenario.FigOriginBytes] < 3*2*probe || f[scenario.FigOriginRequests] < 3 {
				t.Errorf("playhead thumbs from MinIO: counters too small: %v", f)
			}
		}
	}
	left, _ := filepath.Glob(filepath.Join(cfg.TempDir, "playhead-bench-minio-*"))
	if len(left) > 0 {
		t.Errorf("MinIO's data left behind: %v", left)
	}
}

// TestS3CommandLines: for a bucket, playhead's mount gets the s3:// URL, the endpoint,
// path style and region and nothing else, and the keys in its environment, not a
// developer's AWS settings; rclone mounts the remote its environment defines, tuned with
// --use-server-modtime.
func TestS3CommandLines(t *testing.T) {
	t.Setenv("AWS_PROFILE", "someone-elses")
	t.Setenv("AWS_SESSION_TOKEN", "stale")
	record := filepath.Join(t.TempDir(), "record")
	t.Setenv("PLAYHEAD_TEST_RECORD", record)
	exe := fakeDaemon(t, `trap 'exit 0' TERM
printf '%s\n' "$@" > "$PLAYHEAD_TEST_RECORD.args"; env > "$PLAYHEAD_TEST_RECORD.env"
mkdir -p "$3/media" && echo x > "$3/media/a.mkv"
while :; do sleep 0.02; done`)
	bucket := &Bucket{Name: "bench", Region: "us-east-1", AccessKey: "AK", SecretKey: "SK"}
	var req MountRequest
	run := func(sut *ProcessSUT) (args, env []string) {
		t.Helper()
		// A fresh mountpoint: the fake daemon's ready file stays in the last one.
		req = request(t)
		req.Bucket = bucket
		m, err := sut.Mount(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Unmount(); err != nil {
			t.Error(err)
		}
		a, err1 := os.ReadFile(record + ".args")
		e, err2 := os.ReadFile(record + ".env")
		if err1 != nil || err2 != nil {
			t.Fatalf("the fake daemon left no record: %v %v", err1, err2)
		}
		return strings.Split(strings.TrimSpace(string(a)), "\n"), strings.Split(string(e), "\n")
	}

	args, env := run(&ProcessSUT{Exe: exe, ReadyTimeout: 5 * time.Second})
	want := []string{"mount", "s3://bench/", req.Dir, "--cache-dir", req.CacheDir, "--log-level", "warn",
		"--s3-endpoint", "http://127.0.0.1:1", "--s3-path-style", "--s3-region", "us-east-1"}
	if !slices.Equal(args, want) {
		t.Errorf("playhead's command line %q, want %q", args, want)
	}
	for _, kv := range []string{"AWS_ACCESS_KEY_ID=AK", "AWS_SECRET_ACCESS_KEY=SK"} {
		if !slices.Contains(env, kv) {
			t.Errorf("playhead's environment lacks %s", kv)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "AWS_PROFILE=") || strings.HasPrefix(kv, "AWS_SESSION_TOKEN=") {
			t.Errorf("playhead's environment has the runner's %s", kv)
		}
	}

	rc := Rclone{Path: exe, Version: "rclone v0.0.0-fake", ChunkStreams: true}
	cols := RcloneSystems(rc, nil, "cloud", OriginS3, nil)
	if !strings.Contains(cols[1].Info.Command, "--use-server-modtime") || !strings.Contains(cols[0].Info.Command, "PROVIDER=Minio") ||
		strings.Contains(cols[0].Info.Command, "--use-server-modtime") {
		t.Errorf("rclone's columns for a bucket: %q, %q", cols[0].Info.Command, cols[1].Info.Command)
	}
	args, env = run(cols[1].SUT.(*ProcessSUT))
	if args[0] != "mount" || args[1] != "playheadbench:bench" || args[2] != req.Dir ||
		!slices.Contains(args, "--use-server-modtime") || !slices.Contains(args, chunkStreamsFlag) {
		t.Errorf("rclone tuned's command line %q", args)
	}
	for _, kv := range []string{"RCLONE_CONFIG_PLAYHEADBENCH_TYPE=s3", "RCLONE_CONFIG_PLAYHEADBENCH_PROVIDER=Minio",
		"RCLONE_CONFIG_PLAYHEADBENCH_ENDPOINT=http://127.0.0.1:1", "RCLONE_CONFIG_PLAYHEADBENCH_ACCESS_KEY_ID=AK",
		"RCLONE_CONFIG_PLAYHEADBENCH_SECRET_ACCESS_KEY=SK", "RCLONE_CONFIG_PLAYHEADBENCH_REGION=us-east-1"} {
		if !slices.Contains(env, kv) {
			t.Errorf("rclone's environment lacks %s", kv)
		}
	}
}

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/playhead/playhead/origin"
)

// fioJob is one fio job set: fio writes its files with crc32c verification headers
// into the origin's directory, then reads them back through the mount with
// verify_only, which checks every block's header and checksum.
type fioJob struct {
	name    string
	args    []string // workload: the same for the write and the verify run
	numjobs int
	size    int64 // per job (one file each)
}

var fioJobs = []fioJob{
	// A copy or a player: large sequential reads, four files at once.
	{"seq", []string{"--bs=256k"}, 4, 16 << 20},
	// A database or an index: small random reads, two files at once.
	{"rnd", []string{"--bs=4k", "--randseed=7"}, 2, 4 << 20},
}

// writeArgs and verifyArgs are the fio command lines for job j in dir.
func (j fioJob) writeArgs(dir string) []string {
	rw := "--rw=write"
	if j.name == "rnd" {
		rw = "--rw=randwrite"
	}
	return j.common(dir, rw, "--do_verify=0")
}

func (j fioJob) verifyArgs(dir string) []string {
	rw := "--rw=read"
	if j.name == "rnd" {
		rw = "--rw=randread"
	}
	return j.common(dir, rw, "--verify_only=1", "--readonly")
}

func (j fioJob) common(dir string, extra ...string) []string {
	args := []string{"--name=" + j.name, "--directory=" + dir, "--ioengine=psync",
		fmt.Sprintf("--numjobs=%d", j.numjobs), fmt.Sprintf("--size=%d", j.size),
		"--verify=crc32c", "--output-format=json"}
	return append(append(args, j.args...), extra...)
}

// fioResult is what a verify run reports: bytes read, jobs that failed and blocks
// whose verification failed.
type fioResult struct {
	read         int64
	errors       int
	verifyFailed int
}

// runFio runs fio with args and returns its JSON summary. A verify failure makes fio
// exit non-zero and print "verify failed" on stderr; both count as errors.
func runFio(t *testing.T, fio string, args []string) (fioResult, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(fio, args...)
	cmd.Dir = t.TempDir() // fio saves its verify state files in the working directory
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Jobs []struct {
			Error int `json:"error"`
			Read  struct {
				IOBytes int64 `json:"io_bytes"`
			} `json:"read"`
		} `json:"jobs"`
	}
	var res fioResult
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return res, fmt.Errorf("fio %s: %v; output %q, stderr %q", strings.Join(args, " "), runErr, stdout.String(), stderr.String())
	}
	for _, j := range out.Jobs {
		res.read += j.Read.IOBytes
		if j.Error != 0 {
			res.errors++
		}
	}
	res.verifyFailed = strings.Count(stderr.String(), "verify failed")
	if runErr != nil || res.verifyFailed > 0 {
		res.errors = max(res.errors, 1)
		return res, fmt.Errorf("fio %s: %v: %s", strings.Join(args, " "), runErr, stderr.String())
	}
	return res, nil
}

// fio's own data verification through the mount: files fio wrote with crc32c headers
// are served by the built-in origin from a real directory and read back through
// playhead with verify_only, cold (fresh cache) and cached (a new mount on the same
// cache, so the bytes come from playhead's block cache, not the kernel's page cache).
func TestFioVerify(t *testing.T) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_FUSE") == "1" {
			t.Fatalf("fio required (PLAYHEAD_REQUIRE_FUSE=1; make deps installs it) but not found: %v", err)
		}
		t.Skipf("fio not installed (apt-get install fio, or make deps): %v", err)
	}
	dir := t.TempDir()
	var want int64
	for _, j := range fioJobs {
		if _, err := runFio(t, fio, j.writeArgs(dir)); err != nil {
			t.Fatalf("writing the verification files: %v", err)
		}
		want += int64(j.numjobs) * j.size
	}
	o := origin.New(origin.Options{Dir: dir})
	url, err := o.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	opts := testOptions(t)

	var figures []string
	for _, run := range []string{"cold", "cached"} {
		m := mountHTTP(t, url, opts)
		var read int64
		var errs, failed int
		for _, j := range fioJobs {
			res, err := runFio(t, fio, j.verifyArgs(m.Dir))
			if err != nil {
				t.Errorf("%s run, job %s: %v", run, j.name, err)
			}
			read += res.read
			errs += res.errors
			failed += res.verifyFailed
		}
		fst := m.FS.FetchStats()
		figures = append(figures, fmt.Sprintf("%s: %.0f MiB verified, %d verify errors, %d jobs failed, %.1f MiB from the origin (%d blocks not cached: disk behind)",
			run, mib(read), failed, errs, mib(fst.BytesFetched), fst.CacheSkipped))
		if read != want {
			t.Errorf("%s run: fio read %d bytes, want %d", run, read, want)
		}
		m.Unmount()
	}
	figure(t, "fio %s verify=crc32c verify_only=1 through the mount, jobs: seq (4 files of 16 MiB, 256 KiB reads), "+
		"rnd (2 files of 4 MiB, 4 KiB random reads); %s", fioVersion(fio), strings.Join(figures, "; "))
}

func fioVersion(fio string) string {
	out, err := exec.Command(fio, "--version").Output()
	if err != nil {
		return "(unknown version)"
	}
	return strings.TrimSpace(string(out))
}

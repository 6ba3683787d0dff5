package scenario

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// playerRun is what one run of a player command (ffmpeg, ffprobe) did.
type playerRun struct {
	// Wall is from the start of the process to its exit: for ffmpeg decoding one frame,
	// its time to first frame, the player's own start-up (about 0.1 s) included.
	Wall time.Duration
	// Read is rchar of /proc/PID/io at its exit: the bytes its read(2)-family calls
	// returned, from every file it opened (its libraries' ELF headers and /proc
	// included: 183 kB for ffmpeg, which runChecked subtracts), or -1 when the kernel
	// did not say.
	Read   int64
	Output []byte // its standard output, which the scenario checks
}

// stderrTail is how much of a failed player's standard error its error quotes.
const stderrTail = 2 << 10

// runPlayer runs argv with its working directory dir and returns what it did; a run
// that exits non-zero is an error quoting the end of its standard error. The process is
// waited for without being reaped (waitid WNOWAIT) so its /proc/PID/io, which holds the
// counts of all its threads until it is reaped, can be read at its exit.
func runPlayer(ctx context.Context, dir string, argv []string) (playerRun, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return playerRun{}, err
	}
	var info unix.Siginfo
	var werr error
	for {
		werr = unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(werr, unix.EINTR) {
			break
		}
	}
	run := playerRun{Wall: time.Since(start), Read: -1}
	if werr == nil {
		if n, err := readRchar(cmd.Process.Pid); err == nil {
			run.Read = n
		}
	}
	err := cmd.Wait()
	run.Output = out.Bytes()
	if err != nil {
		tail := errOut.Bytes()
		if len(tail) > stderrTail {
			tail = tail[len(tail)-stderrTail:]
		}
		return run, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(tail))
	}
	return run, nil
}

// readRchar reads the rchar line of /proc/PID/io.
func readRchar(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "rchar:"); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	return 0, fmt.Errorf("no rchar in /proc/%d/io", pid)
}

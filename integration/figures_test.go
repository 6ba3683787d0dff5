package integration

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
)

// Reliability figures: every reliability test prints its result as one line
//
//	RELIABILITY <test name>: <figure text>
//
// (scripts/reliability collects these lines into docs/RELIABILITY.md), and reads its
// length from the environment: PLAYHEAD_LONG=1 selects the long versions.
const longEnv = "PLAYHEAD_LONG"

// long reports whether the long versions of the reliability tests were asked for.
func long() bool { return os.Getenv(longEnv) == "1" }

// figure prints a reliability figure line for t.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("RELIABILITY %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// badBytes counts the bytes of p that differ from the pattern for seed at off.
func badBytes(seed uint64, p []byte, off int64) int64 {
	if pattern.Verify(seed, p, off) == nil {
		return 0
	}
	want := make([]byte, len(p))
	pattern.Fill(seed, want, off)
	var n int64
	for i := range p {
		if p[i] != want[i] {
			n++
		}
	}
	return n
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(des)
}

// settleTo waits (at most limit) until the goroutines and open files of the process are
// back to at most the baseline, and returns what it last counted.
func settleTo(baseG, baseFD int, limit time.Duration) (g, fd int) {
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		g, fd = runtime.NumGoroutine(), openFDs()
		if (g <= baseG && fd <= baseFD) || time.Since(start) > limit {
			return g, fd
		}
	}
}

// fdList names this process's open file descriptors, for a leak report.
func fdList() string {
	des, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	for _, de := range des {
		target, _ := os.Readlink("/proc/self/fd/" + de.Name())
		fmt.Fprintf(&b, "%s -> %s\n", de.Name(), target)
	}
	return b.String()
}

// goroutineDump is the stacks of every goroutine, for a leak report.
func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes, or -1.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(rest)), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// resetPeakRSS starts VmHWM again from the current RSS (Linux: clear_refs 5), so a test
// reports its own peak, not an earlier test's.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

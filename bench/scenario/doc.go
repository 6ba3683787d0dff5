// Package scenario defines the workloads of `playhead bench run`: what a video player, a
// seeking viewer, a media scanner, a copy, several viewers at once, the kernel's
// out-of-order read-ahead and a second viewing do to a mounted filesystem, and what real
// players (FFmpeg, ffprobe) do to it (players.go), and the figures each one yields. A scenario only reads files under a directory; it does not
// know what serves them. The runner (package bench/runner) starts the system under test,
// counts the origin's traffic and samples the daemon, so the same scenarios run against a
// real FUSE mount in `bench run` and against a fake in the tests.
//
// Design notes and traps:
//   - Every byte a scenario reads is checked against the origin's pattern (see Verify). A
//     mismatch is a *MismatchError; the runner stops the whole run on one, since a fast
//     filesystem that returns wrong bytes has no figures worth printing. A real player
//     reads in its own process: its output is checked against its output on local disk.
//   - Checking costs CPU on the reading side. Paced scenarios check inline (a 256 KiB
//     check is about a tenth of a millisecond, far below the 10 ms freeze threshold);
//     bulk checks on a second goroutine so it measures the filesystem, not the checker.
//   - Each scenario owns a directory on the origin named after it, so scenarios never
//     share files (and never share cached blocks across trials: every trial gets a fresh
//     cache from the runner anyway).
//   - Figures are computed from what happened (samples, clocks, counters), never assumed
//     from the configuration; a figure a scenario cannot measure is absent, not zero.
package scenario

// Package runner runs `playhead bench run`: it serves the scenarios' files from the
// built-in origin, nginx or MinIO (an S3 bucket) behind an emulated link, and for every case, trial and system
// (playhead, rclone, the ceilings) mounts the system on a fresh cache, runs the case, and
// records the origin's counters and the daemon's peak memory and CPU.
//
// Design notes and traps:
//   - The system under test is an interface (SUT): the real one (ProcessSUT) spawns
//     this very binary's `mount` as a child process, so the daemon's memory and CPU are
//     its own and a crash of the daemon cannot take the measurements with it; tests use a
//     fake that needs no FUSE.
//   - A mount is ready when a stat of one of the case's files succeeds through it. The
//     runner then waits Config.Warm (default 0.5 s): the HTTP source dials its spare
//     keep-alive connections in the background after its probe (one RTT plus the
//     handshake charge, 0.4 s on the far link), and a scenario started sooner would
//     measure that dial instead of the steady state a player meets.
//   - As root the page cache is dropped after the warm-up, so cached blocks written by an
//     earlier mount (rewatch) are read from disk, not memory. Without root it cannot be,
//     and the report says so.
//   - The origin's counters are reset when a mount is ready and read after the trial's
//     mounts are stopped, so they hold what the trial's last mount fetched, read-ahead
//     that was never read included. The daemon's peak RSS and CPU are likewise those of
//     the trial's last mount.
//   - A data mismatch (scenario.MismatchError) stops the whole run; any other failure is
//     the trial's, recorded with its reason, and the run goes on.
//   - Systems are columns. A trial of each runs before the next trial of any, so a slow
//     spell of a shared machine is spread over all of them. rclone runs through the same
//     ProcessSUT with its own command line; it exits 143 after a clean SIGTERM unmount.
//   - Ceilings (ceiling.go) are not filesystems: a plain HTTP client that reads the way
//     the scenario is known to read, or the origin's files on local disk. Each says for
//     which scenarios it stands for a limit; elsewhere the report shows "-" and why.
//   - nginx does not count bytes per request live like the built-in origin: its counters
//     come from its access log, written when a request ends, so they are read (and
//     reset) once the log has been quiet for a moment.
//   - The s3 origin (s3.go) is MinIO, started as a separate process (it is AGPL: never
//     imported) on a fresh data directory under the temp dir, with the files uploaded
//     to bucket "bench" before the link comes up. MountRequest.Bucket is then set and
//     OriginURL is the S3 endpoint through the link: playhead mounts s3://bench/ with
//     only --s3-endpoint, --s3-path-style and --s3-region (the keys in its environment,
//     the runner's AWS_ variables removed), rclone mounts an s3 remote defined by
//     RCLONE_CONFIG_ variables, and the HTTP ceilings read presigned URLs (a Range
//     header does not break the signature; HEAD needs its own).
//   - MinIO's origin bytes and requests are its own counts, from its Prometheus
//     metrics v3 (/minio/metrics/v3/api/requests), read when a mount is ready and after
//     the trial, each once they have not moved for a moment (MinIO counts a request when
//     it ends), so seeding, the probe and the mounts' start-up are not in a trial. The
//     v2 endpoints are cached for about 10 s and must not be used. The link adds its own
//     count (bytes down the link, headers included): two witnesses for rewatch's 0.
package runner

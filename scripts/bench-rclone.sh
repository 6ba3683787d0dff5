#!/usr/bin/env bash
# Makes sure the benchmark's comparator has --vfs-read-chunk-streams (rclone v1.68+),
# rclone's parallel chunk reader, so its tuned column is rclone at its best. Debian's
# rclone (v1.60 in bookworm) lacks it; then a pinned rclone is built from the Go module
# proxy into bin/deps, where `playhead bench run --compare rclone` looks first. If the
# build fails or takes too long, the Debian rclone is used and the report says which
# version ran and that it lacks the flag.
set -euo pipefail
version="${RCLONE_VERSION:-v1.76.0}"
dest="$(pwd)/bin/deps"
timeout_s="${RCLONE_BUILD_TIMEOUT:-900}"
has_streams() { local help; help="$("$1" mount --help 2>/dev/null)" || true; [[ "$help" == *--vfs-read-chunk-streams* ]]; }

if [ -x "$dest/rclone" ] && has_streams "$dest/rclone"; then
  echo "playhead: $("$dest/rclone" version | head -1) in $dest"
  exit 0
fi
if command -v rclone >/dev/null && has_streams rclone; then
  echo "playhead: $(rclone version | head -1) has --vfs-read-chunk-streams"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "playhead: no go to build a newer rclone; the benchmark will use $(rclone version 2>/dev/null | head -1 || echo 'no rclone')" >&2
  exit 0
fi
echo "playhead: building rclone $version into $dest (the system's has no --vfs-read-chunk-streams; a few minutes)"
mkdir -p "$dest"
if GOBIN="$dest" timeout "$timeout_s" go install "github.com/rclone/rclone@$version"; then
  echo "playhead: $("$dest/rclone" version | head -1) in $dest"
else
  echo "playhead: building rclone $version failed or took over ${timeout_s}s; the benchmark will use $(rclone version 2>/dev/null | head -1 || echo 'no rclone'), which lacks --vfs-read-chunk-streams" >&2
fi

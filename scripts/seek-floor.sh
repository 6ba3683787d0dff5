#!/usr/bin/env bash
# The floor of the cluster bench's cold seeks without the peer tier, as docs/BENCHMARKS.md
# records it (session 19): nginx (one worker) serves a 1 GiB file on 127.0.0.1 and a
# playhead mount on a fresh cache reads it. Each round makes the cluster's lone-reader
# seeks: 20 seeks a stripe (8 MiB) apart from 1 MiB on, in a region of the file no round
# read before, each timing its first 256 KiB and then reading 1 MiB in 64 KiB reads over
# 30 ms. One process hop from the node to its origin, as from a node to an owner.
# It prints each round's median and worst in ms, and every seek.
#
# usage: scripts/seek-floor.sh [ROUNDS] [extra mount flags...]
#   PLAYHEAD=bin/playhead  DIR=/tmp/playhead-seekfloor  PORT=18081
set -euo pipefail
rounds=${1:-5}
shift || true
bin=${PLAYHEAD:-bin/playhead}
dir=${DIR:-/tmp/playhead-seekfloor}
port=${PORT:-18081}
command -v nginx > /dev/null || { echo "seek-floor.sh: nginx is missing (make bench-deps installs it)" >&2; exit 2; }
command -v python3 > /dev/null || { echo "seek-floor.sh: python3 is missing" >&2; exit 2; }
[ -x "$bin" ] || { echo "seek-floor.sh: no playhead binary at $bin (make build)" >&2; exit 2; }
. "$(dirname "$0")/nginx-origin.sh"

nginx_origin "$dir" "$port"
rm -rf "$dir/cache"
mkdir -p "$dir/cache" "$dir/mnt"
"$bin" mount "http://127.0.0.1:$port/" "$dir/mnt" --cache-dir "$dir/cache" > "$dir/mount.log" 2>&1 &
mounted=$!
cleanup() {
	fusermount3 -u "$dir/mnt" 2> /dev/null || true
	wait "$mounted" 2> /dev/null || true
	nginx_origin_stop "$dir"
}
trap cleanup EXIT
for _ in $(seq 50); do mountpoint -q "$dir/mnt" && break; sleep 0.1; done
mountpoint -q "$dir/mnt" || { echo "seek-floor.sh: the mount did not come up (see $dir/mount.log)" >&2; exit 1; }

python3 - "$dir/mnt/big.bin" "$rounds" <<'PY'
import os, sys, time
path, rounds = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
stride, seeks = 8 << 20, 20
base = 0
for r in range(rounds):
    if base + (seeks + 1) * stride > size:
        sys.exit("seek-floor.sh: the file is too small for %d rounds" % rounds)
    t = []
    for k in range(seeks):
        off = base + (1 << 20) + k * stride
        t0 = time.perf_counter()
        os.pread(fd, 256 << 10, off)
        t.append((time.perf_counter() - t0) * 1000)
        start = time.perf_counter()
        for j in range(16):
            os.pread(fd, 64 << 10, off + (256 << 10) + j * (64 << 10))
            while time.perf_counter() - start < 0.030 * (j + 1) / 16:
                time.sleep(0.0005)
    base += (seeks + 1) * stride
    s = sorted(t)
    print("round %d: median %.1f worst %.1f ms  (%s)" % (r + 1, s[len(s) // 2], s[-1], " ".join("%.1f" % x for x in t)))
    sys.stdout.flush()
    time.sleep(1)
PY

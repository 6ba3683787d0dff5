#!/usr/bin/env bash
# Loopback bulk read through a playhead mount with a bare dd, as docs/BENCHMARKS.md
# records it: nginx (one worker, sendfile) serves a 1 GiB file on 127.0.0.1; each run
# mounts on a fresh cache, drops the page cache, reads the origin's file back into it
# (so the origin's disk is not what is measured), and times
#     dd if=MNT/big.bin of=/dev/null bs=1M
# It prints one line per run: dd's rate and the daemon's CPU ticks (1/100 s) for the read.
#
# usage: scripts/loopback-dd.sh [RUNS] [extra mount flags...]   (as root: drops caches)
#   PLAYHEAD=bin/playhead  DIR=/tmp/playhead-lb  PORT=18080
set -euo pipefail
runs=${1:-5}
shift || true
bin=${PLAYHEAD:-bin/playhead}
dir=${DIR:-/tmp/playhead-lb}
port=${PORT:-18080}
[ "$(id -u)" -eq 0 ] || { echo "loopback-dd.sh: run as root (it drops the page cache before every run)" >&2; exit 2; }
command -v nginx > /dev/null || { echo "loopback-dd.sh: nginx is missing (make bench-deps installs it)" >&2; exit 2; }
[ -x "$bin" ] || { echo "loopback-dd.sh: no playhead binary at $bin (make build)" >&2; exit 2; }
. "$(dirname "$0")/nginx-origin.sh"
nginx_origin "$dir" "$port"
trap 'nginx_origin_stop "$dir"' EXIT
for _ in $(seq "$runs"); do
	rm -rf "$dir/cache"
	"$bin" mount "http://127.0.0.1:$port/" "$dir/mnt" --cache-dir "$dir/cache" --log-level warn "$@" > "$dir/logs/mount.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do [ -e "$dir/mnt/big.bin" ] && break; sleep 0.1; done
	if [ ! -e "$dir/mnt/big.bin" ]; then
		echo "loopback-dd.sh: the mount did not come up; its log:" >&2
		cat "$dir/logs/mount.log" >&2
		kill -INT "$pid" 2>/dev/null || true
		exit 1
	fi
	sleep 0.5
	sync; echo 3 > /proc/sys/vm/drop_caches
	cat "$dir/www/big.bin" > /dev/null
	a=$(awk '{print $14+$15}' "/proc/$pid/stat")
	rate=$(dd if="$dir/mnt/big.bin" of=/dev/null bs=1M 2>&1 | tail -1 | awk '{print $(NF-1), $NF}')
	b=$(awk '{print $14+$15}' "/proc/$pid/stat")
	echo "$rate daemon_cpu=$((b - a))ticks"
	kill -INT "$pid"; wait "$pid" 2>/dev/null || true
done

#!/usr/bin/env bash
# The ceiling of a read through a playhead mount whose blocks are all at hand: the
# daemon's own cache, its files in the page cache, the mount fresh (the kernel's pages
# of the FUSE file gone with the old mount). No peer tier or origin can make a mount
# read faster than this: the FUSE round trips, the daemon's read of its cache file and
# the checksum of every block are all still there. docs/BENCHMARKS.md (session 15)
# compares the cluster's copy from peers against it.
#
# Each run: mount on a fresh cache, read the file through it until the cache holds all
# of it (one to four reads, each on a new mount), mount again on the same cache, and time
#     dd if=MNT/big.bin of=/dev/null bs=1M
# It prints the fill's rate and the cached read's, and the daemon's CPU ticks for it.
#
# usage: scripts/cached-dd.sh [RUNS] [extra mount flags...]   (as root)
#   PLAYHEAD=bin/playhead  DIR=/tmp/playhead-cdd  PORT=18081
set -euo pipefail
runs=${1:-3}
shift || true
bin=${PLAYHEAD:-bin/playhead}
dir=${DIR:-/tmp/playhead-cdd}
port=${PORT:-18081}
[ "$(id -u)" -eq 0 ] || { echo "cached-dd.sh: run as root (FUSE mounts)" >&2; exit 2; }
command -v nginx > /dev/null || { echo "cached-dd.sh: nginx is missing (make bench-deps installs it)" >&2; exit 2; }
[ -x "$bin" ] || { echo "cached-dd.sh: no playhead binary at $bin (make build)" >&2; exit 2; }
. "$(dirname "$0")/nginx-origin.sh"
nginx_origin "$dir" "$port"
pid=""
# On any exit: stop the daemon if one runs, make sure nothing stays mounted, stop nginx.
cleanup() {
	if [ -n "$pid" ]; then kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	if mountpoint -q "$dir/mnt"; then fusermount3 -u "$dir/mnt" 2>/dev/null || umount -l "$dir/mnt" || true; fi
	nginx_origin_stop "$dir"
}
trap cleanup EXIT

# mount starts the daemon on $dir/cache and waits for the file; it sets pid.
mount_it() {
	"$bin" mount "http://127.0.0.1:$port/" "$dir/mnt" --cache-dir "$dir/cache" --log-level warn "$@" > "$dir/logs/mount.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do [ -e "$dir/mnt/big.bin" ] && return 0; sleep 0.1; done
	echo "cached-dd.sh: the mount did not come up; its log:" >&2
	cat "$dir/logs/mount.log" >&2
	kill -INT "$pid" 2>/dev/null || true
	exit 1
}
rate() { dd if="$dir/mnt/big.bin" of=/dev/null bs=1M 2>&1 | tail -1 | awk '{print $(NF-1), $NF}'; }

cat "$dir/www/big.bin" > /dev/null
for _ in $(seq "$runs"); do
	rm -rf "$dir/cache"
	# A cold read faster than the cache disk leaves the blocks it waited for uncached
	# (fetch/writer.go); read again until every block is in the cache.
	fill=""
	for _ in $(seq 4); do
		mount_it "$@"
		fill="$fill $(rate)"
		kill -INT "$pid"; wait "$pid" 2>/dev/null || true
		pid=""
		complete=$(( $(du -sm "$dir/cache" | cut -f1) >= 1024 ))
		[ "$complete" -eq 1 ] && break
	done
	# du counts the cache's metadata too: a few blocks may still be missing.
	[ "$complete" -eq 1 ] || echo "cached-dd.sh: the cache still lacks blocks after four reads; the next figure includes fetches" >&2
	mount_it "$@"
	sleep 0.5
	a=$(awk '{print $14+$15}' "/proc/$pid/stat")
	cached=$(rate)
	b=$(awk '{print $14+$15}' "/proc/$pid/stat")
	echo "fill:$fill  cached $cached daemon_cpu=$((b - a))ticks"
	kill -INT "$pid"; wait "$pid" 2>/dev/null || true
	pid=""
done

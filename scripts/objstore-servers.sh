#!/usr/bin/env bash
# Installs the object-store emulators the tests start (package internal/objstore), into
# a cache outside the tree: ${PLAYHEAD_TESTBIN:-$HOME/.cache/playhead} (bin/ and
# azurite/ there; playhead's own block cache, if it uses the same directory, keeps to
# its v2/ subdirectory).
#
#   MinIO (S3)              go install, into bin/minio
#   fake-gcs-server (GCS)   go install, into bin/fake-gcs-server
#   Azurite (Azure Blob)    npm install, into azurite/node_modules/.bin/azurite-blob
#
# MinIO is AGPL-3.0: it is only ever run as a separate test server process (started by
# internal/objstore), never imported by or linked into playhead.
#
# Idempotent: a server already installed at the pinned version (and answering
# --version, or -help for fake-gcs-server) is left as it is. Prints one line per server;
# on a failure it says why and exits non-zero.
#
# Time on a fresh 2-core machine: MinIO's build is the long one, 4 min 25 s including
# its module downloads (measured while fake-gcs-server, about 2.5 min, and Azurite's
# npm install, about 1 min, were installed beside it), so about 5 min in all; with the
# module and build caches still there (a lost binary), 10 to 60 s.
set -euo pipefail

MINIO_MOD=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
FAKEGCS_MOD=github.com/fsouza/fake-gcs-server
FAKEGCS_VERSION=v1.56.1
AZURITE_VERSION=3.37.0

dir=${PLAYHEAD_TESTBIN:-$HOME/.cache/playhead}
mkdir -p "$dir/bin"

# One install at a time per cache directory: a second make deps waits for the first.
if command -v flock >/dev/null; then
  exec 9>"$dir/.install.lock"
  if ! flock -w 3600 9; then
    echo "objstore: another install into $dir has held its lock for an hour; giving up" >&2
    exit 1
  fi
fi

fail=0

# built_version BIN MODULE prints the module version BIN was built from ("" if none).
built_version() {
  go version -m "$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m { print $3 }'
}

# go_server NAME MODULE VERSION PROBE-FLAG installs a Go-built server into $dir/bin.
go_server() {
  local name=$1 mod=$2 version=$3 probe=$4 bin=$dir/bin/$1
  if [ -x "$bin" ] && [ "$(built_version "$bin" "$mod")" = "$version" ] &&
    timeout 20 "$bin" "$probe" >/dev/null 2>&1; then
    echo "objstore: $name $version: $bin (installed)"
    return 0
  fi
  if ! command -v go >/dev/null; then
    echo "objstore: $name: cannot build it, go is not on PATH" >&2
    return 1
  fi
  local log start
  log=$(mktemp)
  start=$(date +%s)
  rm -f "$bin" # go install will not replace a file that is not a Go binary
  if ! GOBIN=$dir/bin GOFLAGS= timeout 1800 go install "$mod@$version" >"$log" 2>&1; then
    echo "objstore: $name: go install $mod@$version failed:" >&2
    tail -n 20 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  if ! timeout 20 "$bin" "$probe" >/dev/null 2>&1; then
    echo "objstore: $name: built $bin, but '$bin $probe' fails" >&2
    return 1
  fi
  echo "objstore: $name $version: $bin (built in $(($(date +%s) - start)) s)"
}

azurite() {
  local prefix=$dir/azurite bin=$dir/azurite/node_modules/.bin/azurite-blob have=
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "objstore: azurite: needs Node.js and npm on PATH (Debian: apt-get install nodejs npm)" >&2
    return 1
  fi
  if [ -x "$bin" ]; then
    have=$(timeout 20 "$bin" --version 2>/dev/null || true)
  fi
  if [ "$have" = "$AZURITE_VERSION" ]; then
    echo "objstore: azurite $AZURITE_VERSION: $bin (installed; node $(node --version))"
    return 0
  fi
  local log start
  log=$(mktemp)
  start=$(date +%s)
  mkdir -p "$prefix"
  # Azurite 3.37 declares node >= 22; it serves blobs on node 20 all the same (the
  # engine warnings are expected there).
  if ! timeout 600 npm install --prefix "$prefix" --no-audit --no-fund --save-exact \
    "azurite@$AZURITE_VERSION" >"$log" 2>&1; then
    echo "objstore: azurite: npm install azurite@$AZURITE_VERSION failed:" >&2
    tail -n 20 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  have=$(timeout 20 "$bin" --version 2>/dev/null || true)
  if [ "$have" != "$AZURITE_VERSION" ]; then
    echo "objstore: azurite: installed, but '$bin --version' says '$have', not $AZURITE_VERSION" >&2
    return 1
  fi
  echo "objstore: azurite $AZURITE_VERSION: $bin (installed in $(($(date +%s) - start)) s; node $(node --version))"
}

# Azurite's npm install mostly waits on the registry: it runs beside the Go builds,
# which take both cores.
azlog=$(mktemp)
azurite >"$azlog" 2>&1 &
azpid=$!
go_server minio "$MINIO_MOD" "$MINIO_VERSION" --version || fail=1
go_server fake-gcs-server "$FAKEGCS_MOD" "$FAKEGCS_VERSION" -help || fail=1
wait "$azpid" || fail=1
cat "$azlog"
rm -f "$azlog"
exit $fail

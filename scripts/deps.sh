#!/usr/bin/env bash
# Installs the Debian packages named on the command line when they are missing.
# "a|b" names alternatives: any one installed is enough, else the first one apt knows
# is installed (nginx-light is gone from newer Debian releases; nginx has what the
# tests use). Root installs with apt-get; anyone else is told what to run.
# With GO_MIN=1.26 it also checks that the go on PATH is at least that version (Go
# itself is not a Debian package of a recent enough version, so it is not installed).
set -euo pipefail

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

if [ -n "${GO_MIN:-}" ]; then
  if ! command -v go >/dev/null; then
    echo "playhead: Go $GO_MIN or newer is needed and go is not on PATH (https://go.dev/dl/)" >&2
    exit 1
  fi
  have=$(go env GOVERSION | sed 's/^go//')
  if [ "$(printf '%s\n%s\n' "$GO_MIN" "$have" | sort -V | head -1)" != "$GO_MIN" ]; then
    echo "playhead: Go $GO_MIN or newer is needed, go on PATH is $have (https://go.dev/dl/)" >&2
    exit 1
  fi
fi

missing=()
for spec in "$@"; do
  IFS='|' read -r -a alts <<<"$spec"
  ok=
  for pkg in "${alts[@]}"; do
    if installed "$pkg"; then ok=1; break; fi
  done
  [ -n "$ok" ] || missing+=("$spec")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "playhead: missing packages: ${missing[*]}" >&2
  echo "          install them with: sudo apt-get install ${missing[*]//|*/}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "playhead: missing packages ${missing[*]} and no apt-get here; install them with your package manager" >&2
  exit 1
fi
echo "playhead: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
pkgs=()
for spec in "${missing[@]}"; do
  IFS='|' read -r -a alts <<<"$spec"
  pick=${alts[0]}
  for pkg in "${alts[@]}"; do
    if apt-cache show "$pkg" >/dev/null 2>&1; then pick=$pkg; break; fi
  done
  pkgs+=("$pick")
done
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null

#!/usr/bin/env bash
# Installs the Debian packages named on the command line when they are missing.
# Root installs with apt-get; anyone else is told what to run.
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "playhead: missing packages: ${missing[*]}" >&2
  echo "          install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "playhead: missing packages ${missing[*]} and no apt-get here; install them with your package manager" >&2
  exit 1
fi
echo "playhead: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${missing[@]}" >/dev/null

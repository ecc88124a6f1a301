#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for a fixed time each:
#   tools/fuzz-all.sh 30s
# Each target's seed corpus lives in testdata/fuzz/<Target>/ beside it; new
# failing inputs are written there by `go test -fuzz`.
set -euo pipefail
fuzztime="${1:-20s}"
cd "$(dirname "$0")/.."
found=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    found=1
    echo "== $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
if [ "$found" = 0 ]; then
  echo "no fuzz targets found" >&2
  exit 1
fi

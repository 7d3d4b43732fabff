#!/usr/bin/env bash
# Rewrites every tests/invalid/*/expected_error.txt from what etsim prints now, the case's folder as CASE
# and the source tree as SRC (as tests/run_invalid_case.cmake compares them). Review the diff: each
# message must still name the file, the JSON path or line:column, and what was expected.
# Usage: tests/tools/refresh_invalid_expected.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
etsim=${1:-$src/build}/sim/etsim
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for d in "$src"/tests/invalid/*/; do
  d=${d%/}
  "$etsim" --analytic --json "$scratch/report.json" "$d/scenario.json" 2>&1 > /dev/null |
    sed "s#$d#CASE#g; s#$src#SRC#g" > "$d/expected_error.txt" || true
done

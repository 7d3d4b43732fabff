#!/usr/bin/env bash
# --min-bytes and --max-bytes take the K, M and G suffixes the help shows; an unknown suffix is refused.
# Usage: sizes.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
etsim=$build/sim/etsim
out=$("$etsim" --quiet --collective allreduce --min-bytes 1M --max-bytes 4M --step-factor 4 "$src/tests/data/uniform-8.json")
echo "$out" | grep -qE '^ +1048576 ' && echo "$out" | grep -qE '^ +4194304 ' || { echo "FAIL: 1M and 4M not run"; echo "$out"; exit 1; }
set +e
"$etsim" --quiet --collective allreduce --max-bytes 64X "$src/tests/data/uniform-8.json" 2> "${TMPDIR:-/tmp}/sizes.err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "optionally with K, M or G" "${TMPDIR:-/tmp}/sizes.err" || { echo "FAIL: 64X accepted (exit $rc)"; exit 1; }
echo "sizes: 1 passed, 0 failed"

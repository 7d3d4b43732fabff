#!/usr/bin/env bash
# etsim's outputs are checked before any work: an output that is an input, a folder or a device, a path
# that cannot be written, two outputs naming one file: refused (exit 2), nothing written, the input as it
# was; an output through a symbolic link replaces the file it points to and keeps the link.
# Usage: outputs.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
etsim=$build/sim/etsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$src/tests/expect_error.sh"
cd "$work"
cp "$src/tests/data/uniform-8.json" in.json
cp in.json keep.json
expect_error "$work/none" "--json is the input" "$etsim" --analytic --json in.json in.json
expect_error "$work/none" "--plan-out is the input" "$etsim" --analytic --plan-out ./in.json in.json
ln -s in.json alias.json
expect_error "$work/none" "--trace is the input" "$etsim" --quiet --trace alias.json in.json
cmp -s in.json keep.json || { echo "FAIL: the scenario was overwritten"; exit 1; }
expect_error "$work/none" "--json: cannot write here" "$etsim" --analytic --json "$work/no/dir/r.json" in.json
expect_error "$work/none" "--json names a folder or a device" "$etsim" --analytic --json /dev/null in.json
mkdir folder
expect_error "$work/none" "--json names a folder or a device" "$etsim" --analytic --json folder in.json
expect_error "$work/none" "name the same file" "$etsim" --analytic --json r.json --plan-out r.json in.json
ln -s target.json link.json
"$etsim" --analytic --quiet --json link.json in.json > /dev/null
[ -L link.json ] && [ -f target.json ] && jq -e .estimate target.json > /dev/null ||
  { echo "FAIL: a symbolic link was not followed"; exit 1; }
echo "outputs: 1 passed, 0 failed"

#!/usr/bin/env bash
# docs/validation.md's "Predictions of the shipped scenarios" table is bench/shipped.sh's output: fails when
# a figure moved and the table was not regenerated (bench/shipped.sh BUILD_DIR, pasted between the markers).
# Usage: shipped.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$src/bench/shipped.sh" "$build" > "$work/now"
sed -n '/<!-- shipped:begin -->/,/<!-- shipped:end -->/p' "$src/docs/validation.md" | sed '1d;$d' > "$work/doc"
[ -s "$work/doc" ] || { echo "FAIL: no shipped-scenarios table between the markers of docs/validation.md"; exit 1; }
if ! diff "$work/doc" "$work/now"; then
  echo "FAIL: the shipped scenarios' predictions moved (above: < docs/validation.md's table, > bench/shipped.sh now)"
  exit 1
fi
echo "shipped: $(($(wc -l < "$work/now") - 2)) rows as docs/validation.md has them"

#!/usr/bin/env bash
# docs/validation.md's "Founding results" table is bench/founding.sh's output: fails when a figure moved and
# the table was not regenerated (bench/founding.sh BUILD_DIR, pasted between the two markers).
# Usage: founding.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$src/bench/founding.sh" "$build" > "$work/now"
sed -n '/<!-- founding:begin -->/,/<!-- founding:end -->/p' "$src/docs/validation.md" | sed '1d;$d' > "$work/doc"
[ -s "$work/doc" ] || { echo "FAIL: no founding table between the markers of docs/validation.md"; exit 1; }
if ! diff "$work/doc" "$work/now"; then
  echo "FAIL: the founding results moved (above: < the table in docs/validation.md, > bench/founding.sh now)"
  exit 1
fi
echo "founding: $(($(wc -l < "$work/now") - 2)) rows as docs/validation.md has them"

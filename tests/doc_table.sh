#!/usr/bin/env bash
# A table of docs/validation.md that is a bench script's output (bench/NAME.sh BUILD_DIR, pasted between the
# markers <!-- NAME:begin --> and <!-- NAME:end -->): fails when a figure moved and the table was not
# regenerated. NAME: founding (the founding results) or shipped (the shipped scenarios' predictions).
# Usage: doc_table.sh BUILD_DIR SOURCE_DIR NAME
set -euo pipefail
build=$1 src=$(cd "$2" && pwd) name=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$src/bench/$name.sh" "$build" > "$work/now"
sed -n "/<!-- $name:begin -->/,/<!-- $name:end -->/p" "$src/docs/validation.md" | sed '1d;$d' > "$work/doc"
[ -s "$work/doc" ] || { echo "FAIL: no $name table between the markers of docs/validation.md"; exit 1; }
if ! diff "$work/doc" "$work/now"; then
  echo "FAIL: the $name table moved (above: < docs/validation.md's, > bench/$name.sh now)"
  exit 1
fi
echo "$name: $(($(wc -l < "$work/now") - 2)) rows as docs/validation.md has them"

#!/usr/bin/env bash
# The layers, from the compiler's own account of what each file includes (gcc -H over compile_commands.json,
# not a grep of names). A module is a source file X.c or X.cpp with its header X.h; module X depends on Y
# when X.c, X.cpp or X.h includes Y.h, directly or through private headers (a header without a source file
# of its name, such as sim/sim_world.h, is part of whatever includes it). Fails on a cycle of modules (X.c
# includes Y.h and Y.c includes X.h) and on any include of runtime/ or calib/ from model/ or sim/.
# Usage: includes.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
db=$build/compile_commands.json
[ -f "$db" ] || { echo "FAIL: $db missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dirs="model sim runtime calib"
for d in $dirs; do
  for f in "$src/$d"/*.c "$src/$d"/*.cpp; do
    if [ -e "$f" ]; then f=${f#"$src"/}; echo "${f%.*}"; fi
  done
done | sort -u > "$work/modules"
# one compile per source file, syntax only, every header printed with its depth (two at a time)
jq -r '.[] | select(.file | test("/(model|sim|runtime|calib)/[^/]*\\.(c|cpp)$")) | .directory, .file, .command' "$db" |
  paste - - - > "$work/commands"
[ -s "$work/commands" ] || { echo "FAIL: no model/, sim/, runtime/ or calib/ source in $db"; exit 1; }
n=0
while IFS=$'\t' read -r dir file command; do
  n=$((n + 1))
  cmd=$(echo "$command" | sed -e 's/ -o [^ ]*//' -e 's/ -c / /')
  echo "cd '$dir' && $cmd -fsyntax-only -H -w 2> '$work/h$n' > /dev/null || { echo 'FAIL: $file does not compile'; cat '$work/h$n'; exit 1; }; echo '$file' > '$work/f$n'"
done < "$work/commands" > "$work/jobs"
tr '\n' '\0' < "$work/jobs" | xargs -0 -n 1 -P 2 bash -c
for ((i = 1; i <= n; i++)); do
  # the nearest including module file of each header: private headers are looked through
  awk -v src="$src/" -v f="$(cat "$work/f$i")" '
    function module(p,   m) {
      if (index(p, src) != 1) return ""
      m = substr(p, length(src) + 1); sub(/\.[^.\/]*$/, "", m)
      return (m in is_module) ? m : ""
    }
    FILENAME == ARGV[1] { is_module[$0] = 1; next }
    FNR == 1 { stack[0] = module(f) }
    /^\.+ / {
      d = index($0, " ") - 1; path = substr($0, d + 2)
      cmd = "realpath -m \"" path "\""; cmd | getline path; close(cmd)
      owner = ""
      for (k = d - 1; k >= 0 && owner == ""; k--) owner = stack[k]
      m = module(path); stack[d] = m
      if (m != "" && owner != "" && m != owner) print owner, m
    }' "$work/modules" "$work/h$i"
done | sort -u > "$work/pairs"
[ -s "$work/pairs" ] || { echo "FAIL: no includes read from $db"; exit 1; }
bad=0
if grep -E '^(model|sim)/[^ ]* (runtime|calib)/' "$work/pairs"; then
  echo "FAIL: model/ or sim/ includes runtime/ or calib/ (above: includer, included)"
  bad=1
fi
if ! tsort "$work/pairs" > /dev/null 2> "$work/loop"; then
  echo "FAIL: an include cycle between modules:"
  cat "$work/loop"
  bad=1
fi
[ $bad -eq 0 ] || exit 1
echo "includes: $n files, $(wc -l < "$work/pairs") dependencies between $(wc -l < "$work/modules") modules, no cycle, nothing of runtime/ or calib/ in model/ or sim/"

#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and UBSan on) and runs each for
# SECONDS on a seed corpus of the shipped files; fails on any crash, leak or sanitizer report, leaving the
# input under BUILD_DIR/fuzz/artifacts. Every crash found becomes a regression case (tests/invalid/ or a
# runtime fault test). For a longer run: tests/fuzz/run.sh 600 build
# Usage: tests/fuzz/run.sh SECONDS [BUILD_DIR] [TARGET...]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
seconds=$1 build=${2:-$src/build}
shift $(( $# >= 2 ? 2 : 1 ))
targets=${*:-scenario plan histogram tokens checkpoint profile measured}
command -v clang > /dev/null || { echo "fuzz: skipped: no clang on this machine (apt-get install clang)"; exit 0; }
out=$build/fuzz
mkdir -p "$out/artifacts"
flags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11 -D_GNU_SOURCE
       -DET_DEFAULT_PROFILE_DIR="\"$src/scenarios/profiles\"" -DET_DEFAULT_DATA_DIR="\"$src/scenarios\"" -I"$src/model" -I"$src/runtime" -I"$src/calib" -I"$src/tests/fuzz")
model=$(ls "$src"/model/*.c)
runtime=("$src"/runtime/rt_data.c)
# the CPU runtime's and its kernels' sources, as runtime/CMakeLists.txt lists them (written at configure time)
[ -f "$build/runtime-sources.txt" ] || { echo "fuzz: $build/runtime-sources.txt missing: configure $build with cmake first"; exit 2; }
mapfile -t cpu_runtime < "$build/runtime-sources.txt"
libs=(-ljansson -lm -lxxhash)
export ET_FUZZ_DIR=$out ET_FUZZ_PLAN=$src/tests/fuzz/fuzz-plan.json ET_PROFILE_DIR=$src/scenarios/profiles
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 OPENBLAS_NUM_THREADS=1
status=0
# Seeds that pass the headers: a real checkpoint of $ET_FUZZ_PLAN's model and a real measured.json (naming
# a copy of the plan kept beside the corpus), from a 3-step etrun run when etrun is built.
seeds_run=$out/seed-run
rm -rf "$seeds_run" && mkdir -p "$seeds_run"
if [ -x "$build/runtime/etrun" ] && command -v jq > /dev/null; then
  jq '.run.steps = 3 | .run.warmup_steps = 1' "$ET_FUZZ_PLAN" > "$seeds_run/plan.json"
  "$build/runtime/etrun" --quiet --save "$seeds_run/ck" --out "$seeds_run/measured.json" "$seeds_run/plan.json" \
    > /dev/null 2>&1 || echo "fuzz: no etrun seeds (etrun failed)"
fi
for t in $targets; do
  case $t in
    scenario) extra=(); seeds=("$src"/scenarios/*.json "$src"/scenarios/validation/*.json "$src"/tests/invalid/*/scenario.json) ;;
    plan) extra=("${cpu_runtime[@]}" -lopenblas); seeds=("$src"/tests/data/*plan*.json "$ET_FUZZ_PLAN") ;;
    histogram) extra=(); seeds=("$src"/scenarios/data/*.csv "$src"/tests/invalid/*/*.csv) ;;
    tokens) extra=("${runtime[@]}"); seeds=() ;;
    checkpoint) extra=("${cpu_runtime[@]}" -lopenblas); seeds=("$seeds_run/ck/checkpoint.bin") ;;
    profile) extra=(); seeds=("$src"/scenarios/profiles/*.json "$src"/tests/invalid/profile-*/*.json) ;;
    measured) extra=(); seeds=("$seeds_run/measured.json") ;;
    *) echo "fuzz: unknown target $t"; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  if ! clang "${flags[@]}" -o "$out/fuzz_$t" "$src/tests/fuzz/fuzz_$t.c" $model "${extra[@]}" "${libs[@]}" 2> "$out/$t.build.log"; then
    echo "fuzz: $t does not build:"; tail -5 "$out/$t.build.log"; status=1; continue
  fi
  corpus=$out/corpus-$t
  mkdir -p "$corpus"
  for f in "${seeds[@]}"; do [ -f "$f" ] && cp "$f" "$corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")"; done
  if [ "$t" = tokens ] && [ -x "$build/tests/make_tokens" ]; then "$build/tests/make_tokens" "$corpus/seed.bin" 256 64 50 > /dev/null 2>&1 || true; fi
  if "$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/artifacts/$t-" \
       "$corpus" > "$out/$t.log" 2>&1; then
    echo "fuzz: $t: $(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$out/$t.log") inputs in ${seconds} s, no crash"
  else
    echo "fuzz: $t: FAIL (crash or sanitizer report; input in $out/artifacts):"; grep -m5 -E "ERROR|SUMMARY|runtime error" "$out/$t.log"
    status=1
  fi
done
exit $status

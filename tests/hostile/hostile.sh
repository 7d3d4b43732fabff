#!/usr/bin/env bash
# Hostile input, every kind ET reads: scenarios (each value of three shipped ones given a wrong type, and
# each number 1e308 and -1e308), device profiles, length histograms, platform files, price files, plans, token
# files, measured.json files, checkpoints, command-line values, and outputs that name inputs. A case is
# handled when the tool exits 2 (bad input; 3 where the input is valid but cannot run), says why naming
# the file, a JSON path or the flag, writes no output, leaves every input as it was, leaves no temporary file
# and does not crash (no signal, no sanitizer report) within 60 s. Prints each mishandled case, then the
# counts; fails on any mishandled case.
# Usage: hostile.sh BUILD_DIR SOURCE_DIR [--list]
set -uo pipefail
build=$1 src=$(cd "$2" && pwd)
list=${3:-}
etsim=$build/sim/etsim etrun=$build/runtime/etrun etcalib=$build/calib/etcalib
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
in=$work/in out=$work/out
mkdir -p "$in" "$out"
handled=0 mishandled=0
mpi1() { mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 1 "$@"; }

# try NAME WANT -- COMMAND...: WANT is a text stderr must hold (the file's name or a JSON path)
try() {
  local name=$1 want=$2
  shift 3
  [ -n "$list" ] && { echo "$name"; return; }
  local before after rc why=""
  before=$(cd "$in" && find . -type f -exec md5sum {} + | sort)
  timeout 60 "$@" > "$work/stdout" 2> "$work/stderr"
  rc=$?
  after=$(cd "$in" && find . -type f -exec md5sum {} + | sort)
  if [ $rc -eq 124 ]; then why="timed out"
  elif [ $rc -ge 128 ]; then why="killed by signal $((rc - 128))"
  elif [ $rc -ne 2 ] && [ $rc -ne 3 ]; then why="exit status $rc"
  elif grep -qE "AddressSanitizer|runtime error:|Segmentation|Aborted|core dumped" "$work/stderr"; then why="a crash report"
  elif ! grep -qF -- "$want" "$work/stderr"; then why="the message does not name $want"
  elif [ -n "$(ls -A "$out")" ]; then why="wrote $(ls -A "$out" | head -3 | tr '\n' ' ')"
  elif [ "$before" != "$after" ]; then why="changed an input"
  elif find "$in" "$out" -name '*.tmp.*' | grep -q .; then why="left a temporary file"
  fi
  if [ -z "$why" ]; then
    handled=$((handled + 1))
  else
    mishandled=$((mishandled + 1))
    echo "MISHANDLED $name: $why"
    head -c 400 "$work/stderr" | sed 's/^/    /'
  fi
  rm -rf "${out:?}"/* "$in"/ckpt-run 2> /dev/null
}

# --- inputs to start from -------------------------------------------------------------------------------
cp "$src/scenarios/tiny-gpt-cpu.json" "$in/tiny.json"
cp "$src/scenarios/gpt3-13b-dense-a100.json" "$in/gpt.json"
cp "$src/scenarios/mixtral-8x7b-h100.json" "$in/moe.json"
cp "$src/scenarios/profiles/a100-sxm4-80gb.json" "$in/a100.json"
cp "$src/scenarios/data/wikipedia-bert-seqlen-512.csv" "$in/hist.csv"
cp "$src/tests/data/slow-link-platform.xml" "$in/platform.xml"
cp "$src/tests/data/slow-link-8.json" "$in/platform-scenario.json"
jq --arg p "$in/platform.xml" '.cluster.platform_file = $p' "$in/platform-scenario.json" > "$work/t" && mv "$work/t" "$in/platform-scenario.json"
jq '.run.steps = 3 | .run.warmup_steps = 1' "$src/tests/fuzz/fuzz-plan.json" > "$in/plan.json"
if [ -z "$list" ]; then
  "$etrun" --quiet --save "$in/ck" --out "$in/measured.json" "$in/plan.json" > /dev/null 2>&1 ||
    { echo "FAIL: the reference run"; exit 1; }
  "$build/tests/make_tokens" "$in/tokens.bin" 16 40 > /dev/null 2>&1 || { echo "FAIL: make_tokens"; exit 1; }
fi
jq --arg f "$in/tokens.bin" '.run.data = {"source": "file", "file": $f}' "$in/plan.json" > "$in/plan-tokens.json"
echo '{"a100-sxm4-80gb": 1.8}' > "$in/prices.json"
mut() { jq "$2" "$in/$1" > "$in/case.json"; } # a mutated copy of an input as in/case.json

# --- scenarios: every value of three shipped scenarios, wrong --------------------------------------------
for base in tiny gpt moe; do
  while IFS=$'\t' read -r path type; do
    [ -z "$path" ] && continue
    case $path in *description*|*name*) continue ;; esac # free text: any string is fine there
    case $type in
      number) wrong='"many"' ;;
      string) wrong='12345' ;;
      boolean) wrong='"yes"' ;;
    esac
    mut "$base.json" "setpath($path; $wrong)"
    try "scenario $base $path wrong type" "case.json" -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"
    if [ "$type" = number ]; then
      for v in 1e308 -1e308; do
        mut "$base.json" "setpath($path; $v)"
        try "scenario $base $path = $v" "case.json" -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"
      done
    fi
  done < <(jq -r 'paths(scalars) as $p | [($p | tojson), (getpath($p) | type)] | @tsv' "$in/$base.json")
done
mut tiny.json '.modle = {}'
try "scenario unknown key" 'modle' -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"
mut tiny.json '.target = {"samples": 5e-324}'
try "scenario samples 5e-324 (0 steps)" '$.target.samples' -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"

# --- files of every kind: missing, empty, a folder, truncated, not JSON, the wrong JSON type ------------------
bad_files() { # bad_files KIND MAKE-CASE-COMMAND: MAKE writes in/bad (a function of the case in $1)
  local kind=$1 make=$2
  for variant in missing empty folder truncated garbage array; do
    rm -rf "$in/bad"
    case $variant in
      missing) ;;
      empty) : > "$in/bad" ;;
      folder) mkdir "$in/bad" ;;
      truncated) # half of it, or for a CSV table its header cut mid-word ("length,cou")
        case $3 in *.csv) head -c 10 "$in/$3" > "$in/bad" ;; *) head -c $(($(stat -c %s "$in/$3") / 2)) "$in/$3" > "$in/bad" ;; esac ;;
      garbage) printf '\x00\x01\xffETGARBAGE\x7f' > "$in/bad" ;;
      array) echo '[1, 2, 3]' > "$in/bad" ;;
    esac
    $make "$kind $variant"
  done
  rm -rf "$in/bad"
}
case_scenario() { try "scenario file $1" "bad" -- "$etsim" --analytic --json "$out/r.json" "$in/bad"; }
case_profile() { mut tiny.json ".cluster.device = \"$in/bad\""; try "profile $1" "bad" -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"; }
case_histogram() { mut gpt.json ".data.lengths = {\"distribution\": \"histogram\", \"file\": \"$in/bad\"}"; try "histogram $1" "bad" -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"; }
case_platform() { mut platform-scenario.json ".cluster.platform_file = \"$in/bad\""; try "platform $1" "bad" -- "$etsim" --json "$out/r.json" "$in/case.json"; }
case_prices() { try "prices $1" "bad" -- "$etsim" --search --prices "$in/bad" --search-out "$out/s.json" "$in/gpt.json"; }
case_plan() { try "plan $1" "bad" -- "$etrun" --out "$out/m.json" "$in/bad"; }
case_measured() { try "measured.json $1 (etcalib)" "bad" -- "$etcalib" report "$in/bad"; }
case_op_times() { try "measured.json $1 (etsim --op-times)" "bad" -- "$etsim" --analytic --op-times "$in/bad" --json "$out/r.json" "$in/tiny.json"; }
case_tokens() { jq --arg f "$in/bad" '.run.data.file = $f' "$in/plan-tokens.json" > "$in/case.json"; try "token file $1" "bad" -- "$etrun" --out "$out/m.json" "$in/case.json"; }
case_checkpoint() { rm -rf "$in/ckbad" && mkdir -p "$in/ckbad" && { [ -e "$in/bad" ] && cp -r "$in/bad" "$in/ckbad/checkpoint.bin"; true; }; try "checkpoint $1" "ckbad" -- "$etrun" --resume "$in/ckbad" --out "$out/m.json" "$in/plan.json"; rm -rf "$in/ckbad"; }
bad_files scenario case_scenario tiny.json
bad_files profile case_profile a100.json
bad_files histogram case_histogram hist.csv
bad_files platform case_platform platform.xml
bad_files prices case_prices prices.json
bad_files plan case_plan plan.json
bad_files measured case_measured measured.json
bad_files op-times case_op_times measured.json
bad_files tokens case_tokens tokens.bin
bad_files checkpoint case_checkpoint plan.json

# --- values inside the other kinds ----------------------------------------------------------------------
for k in memory_GiB memory_bandwidth_GBps vector_tflops; do
  for v in 0 -1 1e308 '"fast"'; do
    jq ".$k = $v" "$in/a100.json" > "$in/prof.json"
    mut tiny.json ".cluster.device = \"$in/prof.json\""
    try "profile $k = $v" "prof.json" -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"
  done
done
for row in "128,-5" "0,10" "abc,10" "100000,1" "128"; do
  { echo "length,count"; echo "$row"; } > "$in/h.csv"
  mut gpt.json ".data.lengths = {\"distribution\": \"histogram\", \"file\": \"$in/h.csv\"}"
  try "histogram row $row" "h.csv" -- "$etsim" --analytic --json "$out/r.json" "$in/case.json"
done
for bw in 0Bps 1e308GBps -5Bps; do
  sed "s/bandwidth=\"10000000000Bps\"/bandwidth=\"$bw\"/" "$in/platform.xml" > "$in/p2.xml"
  mut platform-scenario.json ".cluster.platform_file = \"$in/p2.xml\""
  try "platform link bandwidth $bw" "p2.xml" -- "$etsim" --json "$out/r.json" "$in/case.json"
done
for v in '"cheap"' -1 1e308; do
  echo "{\"a100-sxm4-80gb\": $v}" > "$in/pr.json"
  try "prices value $v" "pr.json" -- "$etsim" --search --prices "$in/pr.json" --search-out "$out/s.json" "$in/gpt.json"
done
for f in '.run.steps = 0' '.run.steps = "many"' '.run.learning_rate = -1' '.run.learning_rate = 1e308' \
         '.run.seed = -1' '.run.backend = "tpu"' '.run.data = {"source": "file"}' '.run.warmup_steps = 99' \
         '.format_version = 99' '.model.vocab = 1' '.model.vocab = 2' '.data.seq_len = 1 | .data.lengths = {"distribution": "fixed"}' \
         '.run.checkpoint_every = -3' '.run.frobnicate = 1' '.batch.local = 3'; do
  jq "$f" "$in/plan.json" > "$in/p.json"
  try "plan $f" "p.json" -- "$etrun" --out "$out/m.json" "$in/p.json"
done
for f in '.format_version = 9' 'del(.plan_xxh64)' '.ops[1].ranks[0].rank = 7' '.ops[1].ranks[0].median_s = 1e308' \
         '.ops[1].ranks[0].median_s = -2' '.batch_shapes[0][0][0] = -1' '.batch_shapes[0][0] = [1]' \
         '.step_time_s.median = 0' '.tool = "pytorch"' '.ops[0].id = "x"' '.ops = {}' '.plan_xxh64 = "0000000000000000"'; do
  jq "$f" "$in/measured.json" > "$in/m2.json"
  try "measured.json $f" "m2.json" -- "$etcalib" report "$in/m2.json"
done
ck=$in/ck/checkpoint.bin
size=$(stat -c %s "$ck" 2> /dev/null || echo 100)
for at in 8 16 24 40 $((size / 2)) $((size - 3)); do
  rm -rf "$in/ck2" && cp -r "$in/ck" "$in/ck2" && printf '\x5a' | dd of="$in/ck2/checkpoint.bin" bs=1 seek=$at conv=notrunc 2> /dev/null
  try "checkpoint byte $at changed" "ck2" -- "$etrun" --resume "$in/ck2" --out "$out/m.json" "$in/plan.json"
done
for f in '.model.heads = 4' '.model.vocab = 32' '.optimizer.name = "lamb"'; do
  jq "$f" "$in/plan.json" > "$in/p.json"
  try "checkpoint of another plan ($f)" "checkpoint" -- "$etrun" --resume "$in/ck" --out "$out/m.json" "$in/p.json"
done
rm -rf "$in/ck2"
printf 'ETTOKENS\x01\x00\x00\x00' > "$in/tok2.bin"
jq --arg f "$in/tok2.bin" '.run.data.file = $f' "$in/plan-tokens.json" > "$in/case.json"
try "token file truncated header" "tok2.bin" -- "$etrun" --out "$out/m.json" "$in/case.json"

# --- command-line values --------------------------------------------------------------------------------
for args in "--steps -1" "--steps x" "--seed x" "--plan-steps 0" "--top-ops -2" "--set model.layers=x" \
            "--set nosuch.key=1" "--sweep model.layers=" "--collective frobnicate" "--algo nosuch"; do
  flag=${args%% *} value=${args#* }
  want=$flag && case $flag in --set|--sweep) want=${value%%=*} && want=${want%%.*} ;; esac
  # shellcheck disable=SC2086
  try "etsim $args" "$want" -- "$etsim" $args --json "$out/r.json" "$in/tiny.json"
done
for args in "--log-every x" "--frobnicate"; do
  # shellcheck disable=SC2086
  try "etrun $args" "${args%% *}" -- "$etrun" $args "$in/plan.json"
done
try "etrun --backend tpu" 'backend "tpu"' -- "$etrun" --backend tpu --out "$out/m.json" "$in/plan.json"
try "etrun --out without a plan" "no plan given" -- "$etrun" --out "$in/plan.json"

# --- outputs that are inputs ------------------------------------------------------------------------------
mut tiny.json ".cluster.device = \"$in/a100.json\""
cp "$in/case.json" "$in/uses-profile.json"
try "--json names the scenario's profile" "is the input" -- "$etsim" --analytic --json "$in/a100.json" "$in/uses-profile.json"
try "--plan-out names the scenario's profile" "is the input" -- "$etsim" --analytic --plan-out "$in/a100.json" "$in/uses-profile.json"
mkdir -p "$in/profiles" && cp "$in/a100.json" "$in/profiles/mine.json" && cp "$src/scenarios/profiles/host-cpu.json" "$in/profiles/"
mut tiny.json '.cluster.device = "mine"'
cp "$in/case.json" "$in/uses-dir.json"
try "--json names a profile from ET_PROFILE_DIR" "is the input" -- env ET_PROFILE_DIR="$in/profiles" "$etsim" --analytic --json "$in/profiles/mine.json" "$in/uses-dir.json"
try "--compare's third scenario's profile" "is the input" -- env ET_PROFILE_DIR="$in/profiles" "$etsim" --analytic --compare "$in/tiny.json" "$in/tiny.json" "$in/uses-dir.json" --json "$in/profiles/mine.json"
try "--search-out names a --search-devices profile" "is the input" -- env ET_PROFILE_DIR="$in/profiles" "$etsim" --search --search-devices mine --search-out "$in/profiles/mine.json" "$in/tiny.json"
try "--compare's third scenario" "is the input" -- "$etsim" --analytic --compare "$in/tiny.json" "$in/gpt.json" "$in/moe.json" --json "$in/moe.json"
mut gpt.json ".data.lengths = {\"distribution\": \"histogram\", \"file\": \"$in/hist.csv\"}"
try "--json names the histogram" "is the input" -- "$etsim" --analytic --json "$in/hist.csv" "$in/case.json"
try "--json names the platform" "is the input" -- "$etsim" --json "$in/platform.xml" "$in/platform-scenario.json"
jq --arg p "$in/a100.json" '.cluster.device = $p | .cluster.gpus_per_node = 1' "$in/plan.json" > "$in/plan-a100.json"
try "etrun --out names the plan's profile" "is the input" -- "$etrun" --out "$in/a100.json" "$in/plan-a100.json"
try "--trace names the scenario's profile" "is the input" -- "$etsim" --trace "$in/a100.json" "$in/uses-profile.json"
try "etrun --out names the plan" "is the input" -- "$etrun" --out "$in/plan.json" "$in/plan.json"
try "etrun --out names the token file" "is the input" -- "$etrun" --out "$in/tokens.bin" "$in/plan-tokens.json"
try "etrun --out names the checkpoint" "is the input" -- "$etrun" --resume "$in/ck" --out "$in/ck/checkpoint.bin" "$in/plan.json"
try "etcalib fit --out names the base" "is the input" -- "$etcalib" fit "$in/measured.json" --base "$in/a100.json" --out "$in/a100.json"
try "etcalib fit --out names the run" "is the input" -- "$etcalib" fit "$in/measured.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$in/measured.json"
try "etsim --op-times --json names the run" "is the input" -- "$etsim" --analytic --op-times "$in/measured.json" --json "$in/measured.json" "$src/scenarios/tiny-gpt-cpu.json"

[ -n "$list" ] && exit 0
echo "hostile inputs: $handled handled, $mishandled mishandled"
echo "hostile: $((mishandled == 0 ? 1 : 0)) passed, $((mishandled == 0 ? 0 : 1)) failed"
[ "$mishandled" -eq 0 ]

#!/usr/bin/env bash
# Regression cases for defects found by hostile and careless input (issue 17, defects 7-12): each is a clear
# error with exit status 2, never a crash, a hang or a plausible wrong answer.
# Usage: defects.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
passed=0
expect() { # exit-code text command...
  local want=$1 text=$2 rc=0
  shift 2
  timeout 60 "$@" > "$work/out" 2> "$work/err" || rc=$?
  if [ "$rc" != "$want" ] || ! grep -qF -- "$text" "$work/err"; then
    echo "FAIL: $* exited $rc (expected $want) with: $(head -3 "$work/err")"
    exit 1
  fi
  passed=$((passed + 1))
}
u8=$src/tests/data/uniform-8.json
# --min-bytes above --max-bytes: no empty benchmark with a PASS verdict
expect 2 "--min-bytes 1073741824 is larger than --max-bytes 1048576" \
  "$etsim" --collective allreduce --min-bytes 1G --max-bytes 1M "$u8"
# a folder given as the scenario
expect 2 "a folder, not a file" "$etsim" --analytic "$work"
# a number too large for its flag is refused, not clamped
expect 2 "--seed expects an integer" "$etsim" --analytic --seed 99999999999999999999999 "$u8"
# a histogram that never ends (/dev/zero) stops at its first NUL byte
jq '.data = {"seq_len": 128, "lengths": {"distribution": "histogram", "file": "/dev/zero"}, "unpadded": true}' \
  "$u8" > "$work/zero.json"
expect 2 "a NUL byte" "$etsim" --analytic "$work/zero.json"
# lines over 1,023 characters are read whole (leading zeros: the count is 5, not split into two rows)
{ echo "length,count"; printf '64,%05000d\n' 5; } > "$work/long.csv"
jq --arg f "$work/long.csv" '.data = {"seq_len": 128, "lengths": {"distribution": "histogram", "file": $f},
    "unpadded": true}' "$u8" > "$work/long.json"
"$etsim" --analytic --json "$work/long.jr" "$work/long.json" > /dev/null
[ "$(jq '.scenario.data.mean_length' "$work/long.jr")" = 64 ] || { echo "FAIL: a long histogram line was split"; exit 1; }
passed=$((passed + 1))
# a user platform with a route missing, and one that does not parse: exit 2 with the reason, no abort
jq 'del(.cluster.faults) | .name = "a-->b <c>"' "$u8" > "$work/named.json"
"$etsim" --analytic --platform-out "$work/p.xml" "$work/named.json" > /dev/null
python3 - "$work/p.xml" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
m = re.search(r'<route src="gpu-0-0" dst="gpu-0-1".*?</route>\n', s)
open(sys.argv[1].replace("p.xml", "noroute.xml"), "w").write(s[:m.start()] + s[m.end():])
open(sys.argv[1].replace("p.xml", "broken.xml"), "w").write(s.replace("</platform>", ""))
PY
# the scenario's name, with "--" in it, did not break the XML comment: the platform loads
jq --arg p "$work/p.xml" '.cluster.platform_file = $p' "$work/named.json" > "$work/from-xml.json"
"$etsim" --quiet --steps 1 "$work/from-xml.json" > /dev/null
passed=$((passed + 1))
jq --arg p "$work/noroute.xml" '.cluster.platform_file = $p' "$work/named.json" > "$work/noroute.json"
expect 2 "no usable route from gpu-0-0 to gpu-0-1" "$etsim" --quiet "$work/noroute.json"
jq --arg p "$work/broken.xml" '.cluster.platform_file = $p' "$work/named.json" > "$work/broken.json"
expect 2 "Parse error" "$etsim" --quiet "$work/broken.json"
[ "$(wc -l < "$work/err")" -le 2 ] || { echo "FAIL: SimGrid's abort leaked through"; exit 1; }
# the simulator dies with etsim
"$etsim" --quiet --steps 10000 "$src/tests/data/uniform-1024.json" > /dev/null 2>&1 &
parent=$!
sleep 1
child=$(pgrep -P "$parent" || true)
kill -KILL "$parent"
wait "$parent" 2> /dev/null || true
sleep 0.5
# (a zombie waiting for a reaper is dead: only a running or sleeping child counts)
if [ -n "$child" ] && ps -o stat= -p "$child" 2> /dev/null | grep -qv '^Z'; then
  echo "FAIL: the simulator child $child outlived etsim"
  kill -KILL "$child"
  exit 1
fi
passed=$((passed + 1))
# a shipped scenario copied into one's own folder still finds its histogram (./data/... falls back to ET's
# scenarios folder), and the plan it writes names the file found
mkdir -p "$work/mine" && cp "$src/scenarios/mlperf-bert-8.json" "$work/mine/"
"$etsim" --analytic --plan-out "$work/mine/plan.json" "$work/mine/mlperf-bert-8.json" > /dev/null ||
  { echo "FAIL: a copied shipped scenario"; exit 1; }
[ -f "$(jq -r '.data.lengths.file' "$work/mine/plan.json")" ] || { echo "FAIL: the plan's histogram path"; exit 1; }
passed=$((passed + 1))
# a tiny NIC bandwidth: a time-to-train of 10^14 years is printed whole, with its unit (a 32-byte buffer cut
# "days" off a 300-digit figure)
jq '.cluster.nic_Gbps = 1e-12 | .target = {"tokens": 1e15}' "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/slow.json"
"$etsim" --analytic "$work/slow.json" > "$work/out"
grep -qE '^time-to-train [0-9]+ steps: [0-9.e+]+ years training \+ 0\.0 s evaluation = [0-9.e+]+ years$' "$work/out" ||
  { echo "FAIL: the duration of a slow run: $(grep time-to-train "$work/out")"; exit 1; }
passed=$((passed + 1))
echo "defects: $passed passed, 0 failed"

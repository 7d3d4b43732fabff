#!/usr/bin/env bash
# Fabrics and broken parts: a failed NIC on a rail fabric costs what the channel rule says (a figure that
# fails if the failure is ignored), the report names the slowest part and its cost, a knob without effect
# warns, the platform etsim writes simulates like the built-in zone, and --cfg reaches SimGrid.
# Usage: fabric_faults.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
data=$src/tests/data
fail() { echo "FAIL: $*"; exit 1; }
ring_us() { # scenario -> 1 GiB ring all-reduce time in microseconds (simulated)
  "$etsim" --quiet --collective allreduce --algo ring --min-bytes 1G --max-bytes 1G --json "$work/c.json" "$1" \
    > /dev/null || true
  jq '.results[0].time_s * 1e6' "$work/c.json"
}
# 1. NIC 1 of node 3 failed, 4 NICs of 2 channels: 8 channels on 3 NICs, 3 on the busiest, so node 3's
#    bundle runs at 8/3 NICs: the same ring as a healthy cluster of NICs at 2/3 of their speed.
healthy=$(ring_us "$data/uniform-rail-256.json")
failed=$(ring_us "$data/rail-failed-nic-256.json")
jq '.cluster.nic_Gbps = 200 * 2 / 3' "$data/uniform-rail-256.json" > "$work/slow-nics.json"
slow=$(ring_us "$work/slow-nics.json")
echo "ring all-reduce of 1 GiB on 256 GPUs: healthy $healthy us, NIC 1 of node 3 failed $failed us, every NIC at 2/3 $slow us"
awk -v a="$failed" -v b="$healthy" 'BEGIN { exit !(a > 1.2 * b) }' || fail "the failed NIC is ignored ($failed vs $healthy us)"
awk -v a="$failed" -v b="$slow" 'BEGIN { d = a / b - 1; exit !(d < 1e-6 && d > -1e-6) }' ||
  fail "the failed NIC costs $failed us, the channel rule says $slow us"
# 2. the report: the parts, their cost to the step, the slowest part alone
"$etsim" --quiet --json "$work/r.json" "$data/rail-failed-nic-256.json" > "$work/r.txt"
grep -q "^slowest part NIC 1 of node 3 (67% left)" "$work/r.txt" || fail "the text report names no slowest part"
jq -e '.simulation.faults.cost_s > 0 and .simulation.faults.slowest.where == "NIC 1 of node 3"
       and (.simulation.faults.slowest.cost_alone_s - .simulation.faults.cost_s | fabs) < 1e-12
       and .simulation.faults.healthy_step_s < .simulation.faults.step_s' "$work/r.json" > /dev/null ||
  fail "the JSON report's faults section: $(jq -c .simulation.faults "$work/r.json")"
jq -e '.caveats | map(select(test("healthy cluster"))) | length == 1' "$work/r.json" > /dev/null ||
  fail "the analytic estimate does not say it is of the healthy cluster"
# 3. oversubscription under a single leaf changes nothing, and says so
jq '.cluster.fabric = {"oversubscription": 4, "nodes_per_leaf": 64}' "$data/uniform-64.json" > "$work/one-leaf.json"
"$etsim" --analytic --json "$work/w.json" "$work/one-leaf.json" 2> "$work/w.err" > /dev/null
grep -q "warning: .*oversubscription has no effect" "$work/w.err" || fail "no warning for a knob without effect"
jq -e '.warnings | length == 1' "$work/w.json" > /dev/null || fail "the JSON report has no warnings"
# 4. the written platform (the same fabric as a route table) simulates like the built-in zone
jq 'del(.cluster.faults) | .cluster.fabric = {"tiers": 3, "nodes_per_leaf": 1, "leaves_per_pod": 2,
    "core_oversubscription": 2} | .cluster.nodes = 6' "$data/uniform-8.json" > "$work/three-tier.json"
"$etsim" --quiet --steps 2 --platform-out "$work/p.xml" --json "$work/zone.json" "$work/three-tier.json" > /dev/null
jq --arg p "$work/p.xml" '.cluster.platform_file = $p' "$work/three-tier.json" > "$work/from-xml.json"
"$etsim" --quiet --steps 2 --json "$work/xml.json" "$work/from-xml.json" > /dev/null
cmp <(jq -S '.simulation | del(.headline)' "$work/zone.json") <(jq -S '.simulation | del(.headline)' "$work/xml.json") ||
  fail "the written platform simulates differently from the built-in zone"
"$etsim" --analytic --platform-out "$work/big.xml" "$data/uniform-1024.json" > /dev/null 2> "$work/big.err" &&
  fail "--platform-out wrote 1024 GPUs' routes"
grep -q "at most 256 GPUs" "$work/big.err" || fail "--platform-out's size limit: $(cat "$work/big.err")"
[ ! -e "$work/big.xml" ] || fail "--platform-out left a file behind"
# 5. --cfg and --log reach SimGrid; a bad option is an error, not SimGrid's abort
"$etsim" --quiet --steps 2 --cfg contexts/factory:thread --log root.thresh:critical --json "$work/t.json" \
  "$work/three-tier.json" > /dev/null
cmp <(jq -S '.simulation | del(.headline)' "$work/zone.json") <(jq -S '.simulation | del(.headline)' "$work/t.json") ||
  fail "another context factory changed the simulation"
rc=0
"$etsim" --quiet --cfg bogus/key:1 "$work/three-tier.json" > /dev/null 2> "$work/cfg.err" || rc=$?
[ "$rc" = 2 ] || fail "an unknown SimGrid option exits $rc, expected 2 (bad input)"
grep -q "Bad config key: bogus/key" "$work/cfg.err" || fail "the unknown option's message: $(cat "$work/cfg.err")"
[ "$(wc -l < "$work/cfg.err")" -le 2 ] || fail "SimGrid's abort leaked through: $(head -3 "$work/cfg.err")"
echo "fabric_faults: all checks passed"

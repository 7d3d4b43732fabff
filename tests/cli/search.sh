#!/usr/bin/env bash
# etsim --search: every candidate counted once (tried = refused + too big + ranked), the table sorted by
# step time, and the best plan, written with --search-out, estimated again by etsim as that very step.
# Usage: search.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
"$etsim" --search --search-top 5 --search-out "$work/best.json" "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/out"
cat "$work/out"
counts() { sed -n 's/.*; \([0-9]*\) plans tried.*: \([0-9]*\) refused.*, \([0-9]*\) do not fit, \([0-9]*\) miss the deadline, \([0-9]*\) over the budget, \([0-9]*\) ranked.*/\1 \2 \3 \4 \5 \6/p' "$1"; }
read -r tried invalid big slow over ranked < <(counts "$work/out")
[ $((invalid + big + slow + over + ranked)) -eq "$tried" ] || { echo "FAIL: $tried tried, $invalid + $big + $slow + $over + $ranked counted"; exit 1; }
sorted() { sed '/^Pareto/q' "$1" | awk -v c="$2" '$1 ~ /^[0-9]+$/ && NF > 10 {if (prev != "" && $c < prev) bad = 1; prev = $c} END {exit bad}'; }
sorted "$work/out" 5 || { echo "FAIL: the table is not sorted by step time"; exit 1; }
best=$(awk '$1 == 1 {print $5; exit}' "$work/out")
"$etsim" --analytic --quiet --json "$work/r.json" "$work/best.json" > /dev/null
again=$(jq .estimate.step.step_s "$work/r.json")
awk -v a="$best" -v b="$again" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 5e-5 * b)}' ||
  { echo "FAIL: the best plan estimates $again s, the search said $best s"; exit 1; }
grep -q "the best is [0-9.]*x faster" "$work/out" || { echo "FAIL: no comparison with the scenario's own plan"; exit 1; }
# one thread or two: the same plans, the same ranking
"$etsim" --search --search-top 8 --search-threads 1 "$src/scenarios/gpt3-13b-dense-a100.json" | sed 1d > "$work/t1"
"$etsim" --search --search-top 8 --search-threads 2 "$src/scenarios/gpt3-13b-dense-a100.json" | sed 1d > "$work/t2"
cmp -s "$work/t1" "$work/t2" || { echo "FAIL: the ranking depends on the threads"; diff "$work/t1" "$work/t2"; exit 1; }
# the two best simulated too: SimGrid's step beside the analytic one
"$etsim" --search --search-top 2 --search-simulate 2 --steps 1 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/s"
[ "$(sed -n '/^simulated (SimGrid)/,/^$/p' "$work/s" | awk '$1 ~ /^[0-9]+$/ && $4 > 0.5 && $4 < 2' | wc -l)" -eq 2 ] ||
  { echo "FAIL: the simulated top plans"; cat "$work/s"; exit 1; }
# several GPU counts and a deadline: every plan listed trains within it, ranked by GPU-hours
"$etsim" --search --search-top 8 --search-gpus 256,512 --deadline-days 4 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/d"
read -r tried invalid big slow over ranked < <(counts "$work/d")
[ "$slow" -gt 0 ] && [ $((invalid + big + slow + over + ranked)) -eq "$tried" ] || { echo "FAIL: deadline counts"; cat "$work/d"; exit 1; }
sorted "$work/d" 18 || { echo "FAIL: not ranked by GPU-hours"; exit 1; }
awk '$1 ~ /^[0-9]+$/ && NF > 10 && $17 == "days" && $16 > 4 {exit 1}' "$work/d" || { echo "FAIL: a plan past the deadline"; exit 1; }
# two devices: the Pareto front of time against GPU-hours, each plan beating the next on time and losing on
# GPU-hours
"$etsim" --search --search-top 3 --search-gpus 256,512 --search-devices a100-sxm4-80gb,h100-sxm \
  "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/f"
grep -q "h100-sxm" "$work/f" && grep -q "^Pareto front" "$work/f" || { echo "FAIL: devices or front missing"; exit 1; }
sed -n '/^Pareto front/,/^$/p' "$work/f" | awk '$1 ~ /^[0-9]+$/ {h = $18; if (prev != "" && h >= prev) bad = 1; prev = h} END {exit bad}' ||
  { echo "FAIL: the front is not ordered by falling GPU-hours"; exit 1; }
set +e
"$etsim" --search --search-gpus 100 "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null 2> "$work/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "not a multiple of the 8 GPUs" "$work/err" || { echo "FAIL: --search-gpus 100 (exit $rc)"; exit 1; }
# prices per device, a budget in money, global batches: ranked by cost, every listed plan within budget,
# both batches tried, every ranked plan in the CSV, the best and the front in the JSON, why rank 1 wins
echo '{"a100-sxm4-80gb": 1.5, "h100-sxm": 3.2}' > "$work/prices.json"
"$etsim" --search --search-top 6 --search-gpus 256,512 --search-devices a100-sxm4-80gb,h100-sxm --prices "$work/prices.json" \
  --budget 70000 --search-batch 1024,2048 --search-csv "$work/all.csv" --json "$work/s.json" \
  "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/b"
read -r tried invalid big slow over ranked < <(counts "$work/b")
[ "$over" -gt 0 ] && [ $((invalid + big + slow + over + ranked)) -eq "$tried" ] || { echo "FAIL: budget counts"; cat "$work/b"; exit 1; }
grep -q "ranked by cost" "$work/b" || { echo "FAIL: not ranked by cost"; exit 1; }
sorted "$work/b" 20 || { echo "FAIL: the table is not sorted by cost"; exit 1; }
awk '$1 ~ /^[0-9]+$/ && NF > 10 && $20 > 70000 {exit 1}' "$work/b" || { echo "FAIL: a plan over the budget"; exit 1; }
status_rows() { awk -F, -v s="$2" '$23 == s' "$1" | wc -l; }
[ "$(status_rows "$work/all.csv" ranked)" -eq "$ranked" ] || { echo "FAIL: the CSV ranks $(status_rows "$work/all.csv" ranked) plans, the search $ranked"; exit 1; }
[ "$(status_rows "$work/all.csv" over_budget)" -eq "$over" ] || { echo "FAIL: the CSV's over-budget rows"; exit 1; }
[ "$(cut -d, -f3 "$work/all.csv" | sed 1d | sort -u | tr '\n' ' ')" = "1024 2048 " ] || { echo "FAIL: both global batches"; exit 1; }
jq -e '.search.ranked_by == "cost" and (.search.best | length) == 6 and (.search.front | length) > 0
       and all(.search.best[]; .cost <= 70000 and .price_per_gpu_hour > 0)' "$work/s.json" > /dev/null || { echo "FAIL: the JSON"; exit 1; }
grep -q "^why rank 1 wins" "$work/b" || { echo "FAIL: no breakdown of the best against the runner-up"; exit 1; }
# bucket sizes and all-reduce algorithms in the space: every combination ranked, the table names them
"$etsim" --search --search-top 3 --search-buckets 25,100 --search-allreduce ring,tree --search-csv "$work/ba.csv" \
  "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/ba"
[ "$(cut -d, -f20,21 "$work/ba.csv" | sed 1d | sort -u | tr '\n' ' ')" = "100,ring 100,tree 25,ring 25,tree " ] ||
  { echo "FAIL: the bucket and algorithm combinations: $(cut -d, -f20,21 "$work/ba.csv" | sort -u | tr '\n' ' ')"; exit 1; }
grep -q "bucket allreduce" "$work/ba" || { echo "FAIL: the table lacks the bucket and algorithm"; exit 1; }
# exhaustive and never wrong: the best plan is the fastest ranked row of the CSV of every estimated plan, and
# plans the search refused for memory do not fit when etsim estimates them alone (a sample of them)
"$etsim" --search --search-top 1 --search-csv "$work/every.csv" --plan-out "$work/best-plan.json" \
  "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/e"
best=$(awk '$1 == 1 {print $5; exit}' "$work/e")
fastest=$(awk -F, '$23 == "ranked" && (m == "" || $13 < m) {m = $13} END {print m}' "$work/every.csv")
awk -v a="$best" -v b="$fastest" 'BEGIN {d = a - b; exit !(d < 1e-4 && d > -1e-4)}' ||
  { echo "FAIL: the best plan ($best s) is not the fastest ranked row ($fastest s)"; exit 1; }
jq -e '.run.steps == 20 and .parallelism.tensor >= 1' "$work/best-plan.json" > /dev/null || { echo "FAIL: --plan-out with --search"; exit 1; }
awk -F, '$23 == "does_not_fit" && n++ % 97 == 0 && k++ < 4' "$work/every.csv" > "$work/pruned"
[ -s "$work/pruned" ] || { echo "FAIL: no refused plans to check"; exit 1; }
while IFS=, read -r _ gpus global tensor pipeline chunks _ micro _ recompute seqpar zero _; do
  set +e
  "$etsim" --analytic --quiet --set "parallelism.tensor=$tensor" --set "parallelism.pipeline=$pipeline" \
    --set "parallelism.virtual_pipeline=$chunks" --set "parallelism.zero_stage=$zero" \
    --set "parallelism.recompute=\"$recompute\"" --set "parallelism.sequence_parallel=$([ "$seqpar" = 1 ] && echo true || echo false)" \
    --set "batch.local=$micro" --set "batch.global=$global" --set "cluster.nodes=$((gpus / 8))" \
    "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null 2>&1
  rc=$?
  set -e
  [ $rc -eq 3 ] || { echo "FAIL: a plan refused for memory (t$tensor p$pipeline v$chunks z$zero $recompute micro $micro) exits $rc alone"; exit 1; }
done < "$work/pruned"
echo "search: the best is the fastest of every estimated plan; $(wc -l < "$work/pruned") refused plans checked alone"
# a method's knob varied: every tensor-train rank estimated, the lowest rank the fastest here, named in the table
jq 'del(.method.tensor_train.rank_schedule)' "$src/scenarios/encoder-6x768-tt.json" > "$work/tt.json"
"$etsim" --search --search-top 2 --search-vary method.tensor_train.rank=8,16,30 --search-csv "$work/tt.csv" \
  "$work/tt.json" > "$work/tt"
[ "$(cut -d, -f24 "$work/tt.csv" | sed 1d | sort -u | tr '\n' ' ')" = "method.tensor_train.rank=16 method.tensor_train.rank=30 method.tensor_train.rank=8 " ] ||
  { echo "FAIL: --search-vary values: $(cut -d, -f24 "$work/tt.csv" | sort -u | tr '\n' ' ')"; exit 1; }
grep -q "^     method.tensor_train.rank=8$" "$work/tt" || { echo "FAIL: the table does not name the varied value"; cat "$work/tt"; exit 1; }
# the space's own dimensions narrowed: only the values given (2 tensor x 2 micro-batches x 2 sequence
# parallelism, one pipeline, ZeRO and recomputation)
"$etsim" --search --search-top 20 --search-tensor 2,4 --search-pipeline 1 --search-zero 1 --search-recompute none \
  --search-micro 1,2 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/narrow"
read -r tried invalid big slow over ranked < <(counts "$work/narrow")
[ "$tried" -eq 8 ] || { echo "FAIL: the narrowed space tried $tried plans, expected 8"; exit 1; }
awk '$1 ~ /^[0-9]+$/ && NF > 10 && (($8 != 2 && $8 != 4) || $9 != 1 || $16 != 1 || $14 != "none") {exit 1}' "$work/narrow" ||
  { echo "FAIL: a plan outside the narrowed space"; cat "$work/narrow"; exit 1; }
# no plan: the constraint that binds and the nearest plan; exit 3
set +e
"$etsim" --search --deadline-days 1 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/n"
rc=$?
set -e
[ $rc -eq 3 ] && grep -q "the deadline binds: the fastest plan that fits trains in" "$work/n" || { echo "FAIL: no-plan answer (exit $rc)"; cat "$work/n"; exit 1; }
# bad input: a money budget without prices, a broken price file
for args in "--budget 100" "--prices $work/bad.json"; do
  echo '{"a100-sxm4-80gb": -1}' > "$work/bad.json"
  set +e
  # shellcheck disable=SC2086
  "$etsim" --search $args "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null 2> "$work/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] || { echo "FAIL: $args exits $rc"; cat "$work/err"; exit 1; }
done
grep -q 'bad.json: \$.a100-sxm4-80gb: expected a positive price' "$work/err" || { echo "FAIL: the price file's error: $(cat "$work/err")"; exit 1; }
# a mistyped flag is an input error naming the flag (it was exit 3, "no plan", and no reason): a device no
# profile has, GPUs that are not whole nodes, a tensor degree past a node, a price for a device not searched
echo '{"h100": 2.5}' > "$work/h100-prices.json"
while IFS='|' read -r args want; do
  set +e
  # shellcheck disable=SC2086
  "$etsim" --search $args --search-out "$work/none.json" "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null 2> "$work/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] && grep -qF -- "$want" "$work/err" && [ ! -e "$work/none.json" ] ||
    { echo "FAIL: --search $args: exit $rc: $(cat "$work/err")"; exit 1; }
done << EOF2
--search-devices h100|--search-devices: no device profile named "h100"
--search-tensor 16|--search-tensor: a tensor-parallel degree of 16 does not divide the scenario's 8 GPUs a node
--prices $work/h100-prices.json|--prices: "h100" names no device of this search
--price-per-gpu-hour h100=2.5|--price-per-gpu-hour: "h100" names no device of this search
EOF2
echo "ok: bad search flags named"
# a space the scenario's rules refuse whole (1,000 GPUs: no data-parallel degree divides the batch): exit 3
# with a reason, not a bare "no plan"
set +e
"$etsim" --search --search-gpus 1000 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/refused" 2>&1
rc=$?
set -e
[ $rc -eq 3 ] && grep -q "refuse every plan of the space, for example: \$.batch.global: global batch 1024 is not divisible" "$work/refused" ||
  { echo "FAIL: a refused space (exit $rc)"; cat "$work/refused"; exit 1; }
# plans of equal time-to-train rank with the least memory first (ZeRO 3 before 2, when both rank; with no SMs
# taken by collectives, ZeRO 3's prefetched gathers cost it nothing more than ZeRO 2)
"$etsim" --search --search-top 40 --set software.overlap_sms=0 --json "$work/ties.json" \
  "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null
jq -e '[.search.best as $b | range(1; $b | length) | [$b[. - 1], $b[.]]
        | select(((.[0].time_to_train_s - .[1].time_to_train_s) | fabs) <= 1e-9 * .[0].time_to_train_s)]
       | (length > 0) and all(.[0].memory_GiB <= .[1].memory_GiB)' "$work/ties.json" > /dev/null ||
  { echo "FAIL: equal plans not ordered by memory (or no equal plans among the 40 best)"; exit 1; }
# a mixture of experts: expert parallelism is searched (powers of two dividing the 8 experts), the best
# plan keeps it in its scenario, and --search-expert narrows it
"$etsim" --search --search-top 3 --search-csv "$work/moe.csv" --search-out "$work/moe-best.json" \
  "$src/scenarios/mixtral-8x7b-h100.json" > "$work/moe"
[ "$(cut -d, -f25 "$work/moe.csv" | sed 1d | sort -un | tr '\n' ' ')" = "1 2 4 8 " ] ||
  { echo "FAIL: expert degrees searched: $(cut -d, -f25 "$work/moe.csv" | sort -u | tr '\n' ' ')"; exit 1; }
jq -e '.parallelism.expert >= 1' "$work/moe-best.json" > /dev/null || { echo "FAIL: the best plan has no expert degree"; exit 1; }
# every plan's estimate is the one its scenario gets alone (the search's graph cache keys on every option)
"$etsim" --analytic --quiet --json "$work/moe-best.json.out" "$work/moe-best.json" > /dev/null
alone=$(jq '.estimate.step.step_s' "$work/moe-best.json.out")
searched=$(awk -F, '$23 == "ranked" && (m == "" || $13 < m) {m = $13} END {print m}' "$work/moe.csv")
awk -v a="$alone" -v b="$searched" 'BEGIN {exit !(a - b < 1e-6 * b && b - a < 1e-6 * b)}' ||
  { echo "FAIL: the best MoE plan alone $alone s, in the search $searched s"; exit 1; }
"$etsim" --search --search-top 1 --search-expert 8 --search-csv "$work/moe8.csv" "$src/scenarios/mixtral-8x7b-h100.json" > /dev/null
[ "$(cut -d, -f25 "$work/moe8.csv" | sed 1d | sort -u)" = "8" ] || { echo "FAIL: --search-expert 8"; exit 1; }
# under mpirun the space is split over the ranks: the same table as one process
if command -v mpirun > /dev/null; then
  "$etsim" --search --search-top 8 --search-threads 1 --search-gpus 256,512 "$src/scenarios/gpt3-13b-dense-a100.json" |
    sed 1d > "$work/p1"
  mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$etsim" --search --search-top 8 \
    --search-threads 1 --search-gpus 256,512 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/p2"
  grep -q "2 threads" "$work/p2" || { echo "FAIL: the MPI search did not count both ranks"; exit 1; }
  sed 1d "$work/p2" | cmp -s - "$work/p1" || { echo "FAIL: the MPI search ranks differently"; diff <(sed 1d "$work/p2") "$work/p1"; exit 1; }
  echo "search under mpirun -np 2: the same ranking"
else
  echo "SKIP: no mpirun, the MPI split is not checked"
fi
echo "search: 4 passed, 0 failed"

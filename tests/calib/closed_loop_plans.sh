# Sourced by tests/calib/closed_loop.sh and bench/closed_loop.sh: closed_loop_plans SOURCE_DIR WORK_DIR ETSIM
# writes the closed loop's plans into WORK_DIR: fit.json (tiny-gpt-cpu, 20 steps: what the fit measures) and
# the three the fit never sees, encoder.json (a wider masked-LM encoder), tt.json (tensor-train layers) and
# sparse.json (a sparse MLP), the two small ones run 40 steps.
closed_loop_plans() {
  local src=$1 work=$2 etsim=$3
  "$etsim" --analytic --quiet --plan-steps 20 --plan-out "$work/fit.json" "$src/scenarios/tiny-gpt-cpu.json" > /dev/null
  jq '.run.steps = 40' "$src/tests/data/tiny-gpt-tt-plan.json" > "$work/tt.json"
  jq '.run.steps = 40 | .method = {"kind": "sparse", "sparsity": {"mlp": {"density": 0.25, "pattern": "unstructured"}}}' \
    "$src/tests/data/tiny-gpt-plan.json" > "$work/sparse.json"
  cp "$src/tests/data/calib-encoder-plan.json" "$work/encoder.json"
}

# Sourced by the shell tests: expect_error NOT_WRITTEN TEXT COMMAND... runs COMMAND in $work and checks
# that it exits 2, says TEXT on stderr, leaves NOT_WRITTEN unwritten and no temporary file behind.
expect_error() {
  local not_written=$1 want=$2
  shift 2
  set +e
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  set -e
  cat "$work/err"
  [ "$rc" -eq 2 ] || { echo "FAIL: exit status $rc, expected 2"; exit 1; }
  grep -qF -- "$want" "$work/err" || { echo "FAIL: stderr lacks: $want"; exit 1; }
  [ ! -e "$not_written" ] || { echo "FAIL: $not_written was written"; exit 1; }
  if ls "$work" | grep -q '\.tmp\.'; then echo "FAIL: temporary file left"; exit 1; fi
  echo "ok: $want"
}

# Sourced by the bench scripts that read etsim's analytic reports of shipped scenarios (bench/founding.sh,
# bench/shipped.sh): after `et_reports_init NAME [BUILD_DIR]`, $src is the source tree, $etsim BUILD_DIR's
# etsim (default build/) and $work a temporary folder removed on exit; exits 2 when etsim is missing.
et_reports_init() {
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  etsim=${2:-$src/build}/sim/etsim
  [ -x "$etsim" ] || { echo "$1: $etsim missing: build ET first" >&2; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

#!/usr/bin/env bash
# Installs what ET needs to build and test on Debian/Ubuntu (run as root or with sudo available).
set -euo pipefail
packages=(build-essential cmake pkg-config libjansson-dev libsimgrid-dev libjemalloc-dev libopenblas-dev libxxhash-dev libopenmpi-dev
  openmpi-bin jq clang-format gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

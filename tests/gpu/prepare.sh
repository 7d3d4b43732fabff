#!/usr/bin/env bash
# Prepares what a device build needs and the device machine lacks (it has CUDA, NCCL, cuDNN and PyTorch but
# no package registry): Jansson's and xxHash's headers and static libraries, copied from this machine's
# Debian packages (libjansson-dev, libxxhash-dev: scripts/setup.sh installs them) into DIR (default
# .gpu-deps in the repository, which .gitignore leaves out and the device tool carries). Prints its size.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$src/.gpu-deps}
mkdir -p "$dir/include" "$dir/lib"
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
for h in jansson.h jansson_config.h xxhash.h; do
  cp "/usr/include/$h" "$dir/include/"
done
for l in libjansson.a libxxhash.a; do
  cp "/usr/lib/$arch/$l" "$dir/lib/"
done
echo "prepare: $(du -sh "$dir" | cut -f1) in $dir"

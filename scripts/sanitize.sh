#!/usr/bin/env bash
# The suite under AddressSanitizer and UndefinedBehaviorSanitizer: builds build-asan with ET_SANITIZE=ON
# and runs ctest there (fuzzing excluded: it has its own sanitizers; the GPU dry run too: it makes its own
# build). SimGrid's actors run on their own stacks; ASan follows them with detect_stack_use_after_return off
# (docs/validation.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DET_SANITIZE=ON > /dev/null
cmake --build build-asan -j2
export ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0 UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir build-asan --output-on-failure -j2 -E 'fuzz/|gpu/'

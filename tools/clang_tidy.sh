#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# clang-tidy 14 on the library's .cpp files with the checks .clang-tidy names (any warning fails),
# in parallel, from a configured build's compile_commands.json (the presets write one).
#   tools/clang_tidy.sh [BUILD_DIR]     default build/ci; GPUDIAG_JOBS sets the parallelism
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/ci}
JOBS=${GPUDIAG_JOBS:-$(nproc)}
if [ ! -f "$BUILD/compile_commands.json" ]; then
  echo "clang_tidy: $BUILD/compile_commands.json is missing: configure $BUILD with a preset first"
  exit 1
fi
# run-clang-tidy prints each command it runs; only the findings are worth reading.
set +e
run-clang-tidy-14 -quiet -j "$JOBS" -p "$BUILD" "$PWD/libgpudiag/src/.*\.cpp\$" 2>&1 |
  grep -vE '^(clang-tidy-14 |[0-9]+ warnings? generated|Suppressed [0-9]+ warnings|Use -header-filter|Running clang-tidy)'
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || echo "clang_tidy: findings above (the checks and why each runs: .clang-tidy)"
exit "$status"

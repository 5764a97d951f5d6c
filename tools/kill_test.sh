#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long version of the kill -9 test (tests/cpp/recording/recording_kill_test.cpp; CI runs 50
# kills): kills a recording writer at random moments RUNS times and checks every file.
#   tools/kill_test.sh [RUNS=1000] [MAX_DELAY_MS=400] [BUILD=build/dev]
# Prints the test's figures line (runs, files that opened, events read back, largest file, seed),
# which docs/reliability.md quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000}
MAX_DELAY_MS=${2:-400}
BUILD=${3:-build/dev}
bin="$BUILD/tests/cpp/recording/recording_test"
[ -x "$bin" ] || { echo "kill_test: $bin is missing: cmake --build $BUILD --target recording_test" >&2; exit 2; }
start=$(date +%s)
GPUDIAG_KILL_RUNS=$RUNS GPUDIAG_KILL_MAX_DELAY_MS=$MAX_DELAY_MS \
  "$bin" --gtest_filter='RecordingKill.*' --gtest_brief=1
echo "kill_test: $RUNS kills in $(( $(date +%s) - start )) s"

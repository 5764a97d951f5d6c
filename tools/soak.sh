#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long soak: an always-on Session fed 48 hours of a GENERATED inference service
# (tests/soak/service_workload.hpp) from several producer threads, time-compressed, and checked
# as in CI's short run (tests/cpp/soak/service_soak_test.cpp): exact accounting of every event
# offered, resident memory flat after the first service hour, the planted leak found at its
# site and rate. Prints the figures docs/reliability.md quotes.
#
#   tools/soak.sh [hours] [producers...]       (default: 48 hours; 1, 4 and 8 producers)
#     --build DIR   the build holding tests/cpp/soak/service_soak_test (default build/dev)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build/dev
if [ "${1:-}" = "--build" ]; then BUILD=$2; shift 2; fi
HOURS=${1:-48}
shift || true
PRODUCERS=("$@")
[ ${#PRODUCERS[@]} -eq 0 ] && PRODUCERS=(1 4 8)
BIN=$BUILD/tests/cpp/soak/service_soak_test
if [ ! -x "$BIN" ]; then
  echo "soak: $BIN is missing (cmake --build $BUILD --target service_soak_test)" >&2
  exit 2
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "soak: $HOURS service hours, load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
printf '| producers | events | offered (refused and counted) | session: processed + dropped | wall | events/s | RSS at hour 1 → max after | planted → reported leak rate | onset | site |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n'
failed=0
for n in "${PRODUCERS[@]}"; do
  fig="$OUT/figures-$n.tsv"
  if ! GPUDIAG_SOAK_HOURS=$HOURS GPUDIAG_SOAK_PRODUCERS=$n GPUDIAG_SOAK_FIGURES=$fig \
      GPUDIAG_SOAK_REPORT="$OUT/report-$n.txt" "$BIN" >"$OUT/log-$n.txt" 2>&1; then
    echo "soak: $n producers FAILED:" >&2
    grep -B2 -A6 "Failure" "$OUT/log-$n.txt" | head -60 >&2 || tail -30 "$OUT/log-$n.txt" >&2
    failed=1
  fi
  [ -f "$fig" ] || continue
  awk -F'\t' -v n="$n" '
    { v[$1] = $2 }
    END {
      printf "| %d | %d | %d (%d) | %d + %d | %.1f s | %.2f M | %.0f → %.0f MiB | %.2f → %.2f MiB/h | %.0f s | %s |\n",
        n, v["events"], v["offered"], v["refused_and_counted"], v["session_events"],
        v["session_dropped"], v["wall_s"], v["events_per_s"] / 1e6, v["rss_first_hour_mib"],
        v["rss_max_after_mib"], v["planted_bytes_per_hour"] / 1048576,
        v["reported_bytes_per_hour"] / 1048576, v["reported_onset_s"], v["reported_site"]
    }' "$fig"
  echo "    resident MiB by service hour: $(sed -n 's/^rss_by_hour_mib\t//p' "$fig" | tr '\t' ' ')" >&2
done
exit $failed

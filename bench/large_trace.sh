#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Peak memory and speed of `gpudiag analyze` on a large Kineto trace: a corpus trace's events
# replicated COPIES times with shifted times and ids (bench/make_large_trace.py; the file says it
# is synthetic), written under /tmp, plain and gzip. Reports wall time, peak RSS (/usr/bin/time
# -v), RSS as a share of the JSON's size, and MB of JSON per second, best of RUNS.
#
#   bench/large_trace.sh [BUILD_DIR]          BUILD_DIR defaults to build/dev (needs gpudiag_analyze)
#   COPIES=20 RUNS=3 OUT=/tmp/gpudiag-large SOURCE=<corpus trace> bench/large_trace.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build/dev}"
copies="${COPIES:-20}"
runs="${RUNS:-3}"
out="${OUT:-/tmp/gpudiag-large}"
source_trace="${SOURCE:-$root/../shared/corpus/kineto_traces/hta_df_index_resolver.json.gz}"
prog="$build/bench/gpudiag_analyze"

[ -x "$prog" ] || { echo "build gpudiag_analyze first (cmake --build $build --target gpudiag_analyze)" >&2; exit 2; }
[ -f "$source_trace" ] || { echo "no source trace at $source_trace" >&2; exit 2; }
case "$out" in "$root"/*) echo "OUT must not be inside the repository" >&2; exit 2 ;; esac
mkdir -p "$out"
json="$out/large_x${copies}.json"
gz="$json.gz"
if [ ! -s "$json" ]; then
  echo "writing $json ..." >&2
  python3 "$here/make_large_trace.py" --source "$source_trace" --copies "$copies" "$json"
fi
if [ ! -s "$gz" ]; then
  echo "writing $gz ..." >&2
  python3 "$here/make_large_trace.py" --source "$source_trace" --copies "$copies" --gzip "$gz"
fi

json_bytes=$(stat -c %s "$json")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

measure() {  # prints "wall_s rss_kb" of one run of "$@"
  /usr/bin/time -v "$@" > "$work/out" 2> "$work/time" || { cat "$work/time" >&2; return 1; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time" |
         awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
  echo "$wall $rss"
}

echo "source: $(basename "$source_trace"), events replicated $copies times (synthetic)"
echo "JSON: $json_bytes bytes; gzip: $(stat -c %s "$gz") bytes"
echo "machine: $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %8s %10s %10s %10s\n' input "wall s" "peak MB" "RSS/JSON" "MB/s JSON"
for input in "$json" "$gz"; do
  best_wall=""; best_rss=""
  for _ in $(seq "$runs"); do
    read -r wall rss < <(measure "$prog" --format json "$input")
    if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN{exit !(a<b)}'; then
      best_wall=$wall; best_rss=$rss
    fi
  done
  label=$([ "$input" = "$gz" ] && echo gzip || echo plain)
  awk -v l="$label" -v w="$best_wall" -v r="$best_rss" -v j="$json_bytes" 'BEGIN {
    printf "%-6s %8.2f %10.0f %9.1f %% %10.0f\n", l, w, r / 1024, 100 * r * 1024 / j, j / 1e6 / w }'
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

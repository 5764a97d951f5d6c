#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Times, on one machine in one run, three ways through the same Kineto trace:
#   1. Holistic Trace Analysis (from PyPI, in a throw-away venv): load + idle-time breakdown.
#      HTA_PACKAGE names the release: traceinsight==0.6.1 (default; HTA's PyPI name since 0.6) or
#      HolisticTraceAnalysis==0.5.0. HTA_BACKEND names its trace parser: json (HTA's default) or
#      ijson_batch_and_compress (its opt-in streaming loader, with ijson's yajl2_c backend).
#   2. gpudiag analyze (the bench driver over gpudiag::analyze_files)
#   3. the floor: inflate + parse the same file with gpudiag's libraries (libdeflate, simdjson)
# and reports wall time and peak RSS (/usr/bin/time -v) for each.
#
#   bench/compare_hta.sh [TRACE] [BUILD_DIR]
# TRACE defaults to the corpus' 54 MB trace; BUILD_DIR to build/dev (configure with
# -DGPUDIAG_BUILD_BENCH=ON and build gpudiag_analyze gpudiag_parse_floor). HTA_VENV overrides the
# venv location (default /tmp/hta-venv-<package>; reused when present). RUNS sets the repeats for
# the C++ programs (best wall time is reported; default 3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
trace="${1:-$root/../shared/corpus/kineto_traces/hta_df_index_resolver.json.gz}"
build="${2:-$root/build/dev}"
package="${HTA_PACKAGE:-traceinsight==0.6.1}"
backend="${HTA_BACKEND:-json}"
venv="${HTA_VENV:-/tmp/hta-venv-${package//[^A-Za-z0-9.]/_}}"
runs="${RUNS:-3}"

[ -f "$trace" ] || { echo "no trace at $trace" >&2; exit 2; }
for prog in gpudiag_analyze gpudiag_parse_floor; do
  [ -x "$build/bench/$prog" ] || { echo "build $prog first (ninja -C $build $prog)" >&2; exit 2; }
done
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import hta, ijson" 2>/dev/null; then
  echo "installing $package and ijson into $venv ..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$package" ijson
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# HTA reads a directory of rank files.
ln -s "$(readlink -f "$trace")" "$work/$(basename "$trace")"
cat > "$work/hta_idle.py" <<'PY'
import sys, time, warnings, logging
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
if sys.argv[2] != "json":
    import ijson
    from hta.common.trace_parser import set_default_trace_parsing_backend
    from hta.configs.parser_config import ParserBackend
    assert "yajl" in ijson.backend, f"ijson's backend is {ijson.backend}, not yajl2_c"
    set_default_trace_parsing_backend(ParserBackend(sys.argv[2]))
t0 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
rank = sorted(analyzer.t.get_ranks())[0]
try:
    result = analyzer.get_idle_time_breakdown(ranks=[rank], visualize=False)
except TypeError:  # older signature: one rank
    result = analyzer.get_idle_time_breakdown(rank=rank, visualize=False)
t2 = time.perf_counter()
df = result[0] if isinstance(result, tuple) else result
print(df.to_string(), file=sys.stderr)
print(f"hta_load_s {t1 - t0:.3f} hta_idle_s {t2 - t1:.3f} rank {rank}")
PY

# Prints "wall_s rss_kb" of one run of "$@".
measure() {
  /usr/bin/time -v "$@" > "$work/out" 2> "$work/time" || { cat "$work/time" >&2; return 1; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time" |
         awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
  echo "$wall $rss"
}
best() {  # best wall (and its RSS) over $runs runs
  local best_wall="" best_rss="" line
  for _ in $(seq "$runs"); do
    line=$(measure "$@")
    set -- "$@"
    if [ -z "$best_wall" ] || awk -v a="${line% *}" -v b="$best_wall" 'BEGIN{exit !(a<b)}'; then
      best_wall="${line% *}"; best_rss="${line#* }"
    fi
  done
  echo "$best_wall $best_rss"
}

echo "trace: $trace ($(stat -c %s "$trace") bytes)"
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
read -r hta_wall hta_rss < <(measure "$venv/bin/python" "$work/hta_idle.py" "$work" "$backend")
hta_detail=$(cat "$work/out")
read -r gd_wall gd_rss < <(best "$build/bench/gpudiag_analyze" --format json "$trace")
read -r floor_wall floor_rss < <(best "$build/bench/gpudiag_parse_floor" "$trace" ondemand)
floor_detail=$(cat "$work/out")

printf '%-34s %9s %10s\n' "" "wall s" "peak RSS"
printf '%-34s %9.2f %7d MB\n' "HTA load + idle-time breakdown" "$hta_wall" $((hta_rss / 1024))
printf '%-34s %9.2f %7d MB\n' "gpudiag analyze" "$gd_wall" $((gd_rss / 1024))
printf '%-34s %9.2f %7d MB\n' "floor: inflate + parse" "$floor_wall" $((floor_rss / 1024))
echo "HTA: $package, $backend parser: $hta_detail"
echo "floor: $floor_detail"
awk -v h="$hta_wall" -v g="$gd_wall" -v f="$floor_wall" 'BEGIN {
  printf "gpudiag is %.1fx faster than HTA and %.2fx the floor\n", h / g, g / f }'

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpudiag analyze` against PyTorch's own reader, `python _memory_viz.py stats` (the copy that
# comes with the installed torch; it unpickles the whole file with pickle.load, in C), in the same
# run: whole-process wall time and peak RSS (/usr/bin/time -v), best of RUNS, the two alternated.
# Inputs: the corpus snapshots as they are, and a large snapshot generated from one of them
# (bench/make_large_snapshot.py: its device trace replicated COPIES times, shifted in time and
# address; the file says it is synthetic), written under OUT, plain and, with GZIP=1, gzip'ed
# (gpudiag only: _memory_viz.py reads plain pickles).
#
#   bench/snapshot_vs_memory_viz.sh [BUILD_DIR]     BUILD_DIR defaults to build/dev
#   COPIES=100 RUNS=3 OUT=/tmp/gpudiag-snapshots PYTHON=python3 GZIP=1 bench/snapshot_vs_memory_viz.sh
#   GPUDIAG="gpudiag analyze" bench/snapshot_vs_memory_viz.sh   # an installed CLI instead
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build/dev}"
copies="${COPIES:-100}"
runs="${RUNS:-3}"
out="${OUT:-/tmp/gpudiag-snapshots}"
python="${PYTHON:-python3}"
corpus="${CORPUS:-$root/../shared/corpus/memory_snapshots}"
source_snapshot="${SOURCE:-$corpus/decomfl_memory.pickle}"
read -r -a gpudiag <<< "${GPUDIAG:-$build/bench/gpudiag_analyze}"

[ -x "${gpudiag[0]}" ] || command -v "${gpudiag[0]}" > /dev/null ||
  { echo "build gpudiag_analyze first (cmake --build $build --target gpudiag_analyze)" >&2; exit 2; }
[ -f "$source_snapshot" ] || { echo "no source snapshot at $source_snapshot" >&2; exit 2; }
# _memory_viz.py runs without importing torch: find it without importing torch either.
viz="$("$python" -c 'import importlib.util, os
spec = importlib.util.find_spec("torch")
print(os.path.join(os.path.dirname(spec.origin), "cuda", "_memory_viz.py") if spec else "")')"
[ -f "$viz" ] || { echo "no torch/cuda/_memory_viz.py for $python (set PYTHON)" >&2; exit 2; }
case "$out" in "$root"/*) echo "OUT must not be inside the repository" >&2; exit 2 ;; esac
mkdir -p "$out"

large="$out/$(basename "$source_snapshot" .pickle)_x${copies}.pickle"
if [ ! -s "$large" ]; then
  echo "writing $large ..." >&2
  "$python" "$here/make_large_snapshot.py" --source "$source_snapshot" --copies "$copies" "$large"
fi
if [ "${GZIP:-0}" = 1 ] && [ ! -s "$large.gz" ]; then
  echo "writing $large.gz ..." >&2
  gzip -6 -c "$large" > "$large.gz"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

measure() {  # prints "wall_s rss_kb" of one run of "$@" (wall to the millisecond)
  local t0 t1 rss
  t0=$(date +%s%N)
  /usr/bin/time -v "$@" > "$work/out" 2> "$work/time" || { cat "$work/time" >&2; return 1; }
  t1=$(date +%s%N)
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
  awk -v a="$t0" -v b="$t1" -v r="$rss" 'BEGIN { printf "%.3f %d\n", (b - a) / 1e9, r }'
}

keep_best() {  # keeps the faster of the stored and a new "wall rss" for `name`
  local name=$1 w=$2 r=$3
  if [ ! -s "$work/best_$name" ]; then echo "$w $r" > "$work/best_$name"; return; fi
  read -r bw br < "$work/best_$name"
  if awk -v a="$w" -v b="$bw" 'BEGIN{exit !(a<b)}'; then echo "$w $r" > "$work/best_$name"; fi
}

echo "gpudiag: ${gpudiag[*]}"
echo "memory_viz: $python $viz stats"
echo "large: $(basename "$large"), the device trace of $(basename "$source_snapshot") replicated $copies times (synthetic)"
echo "machine: $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %8s | %8s %8s %8s | %8s %8s | %7s %6s\n' input MB "gd s" "gd MB" "MB/s" "viz s" "viz MB" "speedup" "RSS"
shopt -s nullglob
inputs=("$corpus"/*.pickle "$large")
shopt -u nullglob
[ "${GZIP:-0}" = 1 ] && inputs+=("$large.gz")
for input in "${inputs[@]}"; do
  rm -f "$work"/best_*
  for _ in $(seq "$runs"); do
    read -r w r < <(measure "${gpudiag[@]}" "$input")
    keep_best gd "$w" "$r"
    case "$input" in
      *.gz) ;;
      *) read -r w r < <(measure "$python" "$viz" stats "$input"); keep_best viz "$w" "$r" ;;
    esac
  done
  read -r gw gr < "$work/best_gd"
  vw="-" vr="-"
  [ -s "$work/best_viz" ] && read -r vw vr < "$work/best_viz"
  bytes=$(stat -c %s "$input")
  # MB and MB/s are of the pickle: a gzip'ed one counts as its plain twin.
  case "$input" in *.gz) [ -f "${input%.gz}" ] && bytes=$(stat -c %s "${input%.gz}") ;; esac
  awk -v n="$(basename "$input")" -v b="$bytes" -v gw="$gw" -v gr="$gr" -v vw="$vw" -v vr="$vr" 'BEGIN {
    printf "%-44s %8.1f | %8.3f %8.0f %8.0f | ", n, b / 1e6, gw, gr / 1024, b / 1e6 / gw
    if (vw == "-") { printf "%8s %8s | %7s %6s\n", "-", "-", "-", "-"; exit }
    printf "%8.3f %8.0f | %6.1fx %5.2fx\n", vw, vr / 1024, vw / gw, gr / vr }'
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(MB: of the pickle, inflated; speedup: memory_viz wall / gpudiag wall; RSS: gpudiag peak / memory_viz peak)"

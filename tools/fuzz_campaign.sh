#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs libFuzzer campaigns on gpudiag's fuzz targets (tests/fuzz/*_fuzz.cpp) and records what each
# one did: executions, coverage (edges, features), corpus size, crashes.
#
#   tools/fuzz_campaign.sh [options] [target...]      (default: every target the build has)
#     --build DIR     the clang build with GPUDIAG_BUILD_FUZZ=ON (default build/asan: the asan
#                     preset, ASan+UBSan)
#     --seconds N     length of each target's campaign (default 600)
#     --runs N        stop each target after N executions instead
#     --max-len N     mutate inputs of at most N bytes (libFuzzer -max_len; the default is the
#                     largest seed): big seeds (whole traces) otherwise cost milliseconds each
#     --out DIR       where campaigns live (default build/fuzz-campaign): <target>/corpus grows
#                     from the committed seeds over as many sittings as it takes, crashes go to
#                     <target>/crashes
#     --ledger FILE   every sitting is a line of FILE (default tests/fuzz/campaign_ledger.tsv,
#                     committed: the counts outlive the machine and its build folder)
#     --totals        print every target's totals from the ledger (the table docs/reliability.md
#                     quotes) and exit
#     --smoke         CI: a throwaway corpus, fail when a target crashes, leaks, times out or
#                     runs fewer than --min-execs executions (it cannot fuzz)
#     --min-execs N   (with --smoke) default 200
#
# Prints a Markdown table of the sittings' totals (the figures docs/reliability.md quotes). A crash
# is a bug: fix it, and add its reproducer to tests/fuzz/corpus/<target>/, which ctest replays.
# Long campaigns on a shared machine: nice -n 19 tools/fuzz_campaign.sh --seconds 3600 &
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=build/asan
SECONDS_EACH=600
RUNS=""
MAX_LEN=""
OUT=build/fuzz-campaign
LEDGER=tests/fuzz/campaign_ledger.tsv
SMOKE=0
MIN_EXECS=200
TOTALS=0
TARGETS=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --max-len) MAX_LEN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --ledger) LEDGER=$2; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --totals) TOTALS=1; shift ;;
    --min-execs) MIN_EXECS=$2; shift 2 ;;
    -h|--help) sed -n '3,25p' "$0"; exit 0 ;;
    -*) echo "fuzz_campaign: unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done

TABLE_HEAD="| target | sittings | executions | edges (cov) | features (ft) | corpus | crashes |
|---|---:|---:|---:|---:|---:|---:|"
# The ledger's table rows, one per target (or only `only`'s): sums over sittings; coverage and
# corpus are the last sitting's.
ledger_rows() {
  awk -F'\t' -v only="${1:-}" \
    '!/^#/ && NF >= 11 && (only == "" || $1 == only) {
       n[$1] += $4; e[$1] += $6; c[$1] = $7; f[$1] = $8; k[$1] = $9; x[$1] += $10 }
     END { for (t in n) printf "| `%s` | %d | %d | %s | %s | %s | %d |\n", t, n[t], e[t], c[t],
                               f[t], k[t], x[t] }' "$LEDGER" | sort
}
if [ $TOTALS -eq 1 ]; then
  echo "$TABLE_HEAD"
  ledger_rows
  exit 0
fi

if [ ${#TARGETS[@]} -eq 0 ]; then
  for src in tests/fuzz/*_fuzz.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The ledger itself does not make the tree dirty: sittings append to it, two at a time.
[ -n "$(git status --porcelain 2>/dev/null | grep -vxF " M $LEDGER")" ] && COMMIT="$COMMIT+dirty"

# libFuzzer options shared by both modes: an input that takes over 10 s or 2 GiB is a finding.
COMMON=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1)
if [ -n "$RUNS" ]; then LENGTH=(-runs="$RUNS"); else LENGTH=(-max_total_time="$SECONDS_EACH"); fi
[ -n "$MAX_LEN" ] && COMMON+=(-max_len="$MAX_LEN")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
summary=$TABLE_HEAD
for target in "${TARGETS[@]}"; do
  bin="$BUILD/tests/fuzz/$target"
  if [ ! -x "$bin" ]; then
    echo "fuzz_campaign: $bin is missing (configure with clang and GPUDIAG_BUILD_FUZZ=ON)" >&2
    failed=1
    continue
  fi
  seeds="$ROOT/tests/fuzz/corpus/$target"
  if [ $SMOKE -eq 1 ]; then
    work=$(mktemp -d)
    corpus="$work/corpus"; crashes="$work/crashes"; log="$work/log.txt"
  else
    work="$OUT/$target"
    corpus="$work/corpus"; crashes="$work/crashes"; log="$work/last.log"
  fi
  mkdir -p "$corpus" "$crashes"
  start=$(date +%s)
  set +e
  "$bin" "${COMMON[@]}" "${LENGTH[@]}" -artifact_prefix="$crashes/" "$corpus" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
  cov=$(printf '%s' "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(printf '%s' "$done_line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  files=$(find "$corpus" -type f | wc -l)
  found=$(find "$crashes" -type f | wc -l)
  : "${execs:=0}" "${cov:=0}" "${ft:=0}"
  printf '%s: rc %d, %s executions in %ds, cov %s ft %s, corpus %s, crashes %s\n' \
    "$target" "$rc" "$execs" "$elapsed" "$cov" "$ft" "$files" "$found" >&2
  if [ $SMOKE -eq 1 ]; then
    # A finding already reported and open (tests/fuzz/known_open.txt, docs/reliability.md) is
    # said again, loudly, but does not fail CI; any other finding does.
    if [ "$found" -gt 0 ] && grep -qx "$target" tests/fuzz/known_open.txt 2>/dev/null; then
      echo "fuzz_campaign: $target: KNOWN OPEN finding reproduced (docs/reliability.md):" >&2
      tail -8 "$log" >&2
    elif [ $rc -ne 0 ] || [ "$found" -gt 0 ] || [ "$execs" -lt "$MIN_EXECS" ]; then
      echo "fuzz_campaign: $target cannot fuzz (rc $rc, $execs executions, $found crashes):" >&2
      tail -40 "$log" >&2
      failed=1
    fi
    rm -rf "$work"
    sittings=1; total=$execs
  else
    # One short line per append (O_APPEND): sittings of different targets may end together.
    printf '%s\t%s\t%s\t1\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$(date -u +%FT%TZ)" \
      "$COMMIT" "$elapsed" "$execs" "$cov" "$ft" "$files" "$found" "$rc" >>"$LEDGER"
    [ $rc -ne 0 ] && failed=1
    summary="$summary
$(ledger_rows "$target")"
    continue
  fi
  summary="$summary
| $target | $sittings | $total | $cov | $ft | $files | $found |"
done
echo "$summary"
if [ $SMOKE -eq 0 ]; then
  mkdir -p "$OUT"
  echo "$summary" >"$OUT/summary.md"
fi
exit $failed

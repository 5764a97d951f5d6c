#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a GPU machine: runs every examples/python scenario live under gpudiag, records it into
# $OUT/recorded/<name>.gpudiag, and checks its verdict against tests/scenarios/expectations.json.
#   tests/gpu/run_examples.sh [PYTHON]        (PYTHON: an interpreter with gpudiag and torch)
set -u
cd "$(dirname "$0")/../.."
PY=${1:-python3}
OUT=${OUT:-/tmp/gpudiag-out}
mkdir -p "$OUT/recorded" "$OUT/logs"
pass=0; fail=0
for script in examples/python/*.py; do
  name=$(basename "$script" .py)
  [ "$name" = "_common" ] && continue
  start=$(date +%s.%N)
  timeout 120 "$PY" "$script" --record "$OUT/recorded/$name.gpudiag" > "$OUT/logs/$name.txt" 2>&1
  rc=$?
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  verdict=$(grep '^VERDICT ' "$OUT/logs/$name.txt" | tail -1 | cut -c9-)
  ok=$("$PY" - "$name" "$verdict" <<'PYEOF'
import json, sys
name, verdict = sys.argv[1], sys.argv[2]
exp = json.load(open("tests/scenarios/expectations.json"))[name]
try:
    parsed = json.loads(verdict)
    got, serious = parsed["findings"], parsed.get("serious", [])
except Exception:
    print("no-verdict"); sys.exit()
missing = [r for r in exp.get("required", []) if r not in got]
if exp.get("healthy") and serious:
    print("unhealthy:" + ",".join(serious))
else:
    print("ok" if not missing else "missing:" + ",".join(missing))
PYEOF
)
  printf '%-20s rc=%-3s %6.1fs %-12s %s\n' "$name" "$rc" "$secs" "$ok" "$verdict"
  if [ "$ok" = "ok" ] && [ $rc -eq 0 ]; then pass=$((pass+1)); else fail=$((fail+1)); fi
done
echo "examples: $pass passed, $fail failed"

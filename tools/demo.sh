#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up gpudiag in .venv and prints the diagnosis of the recording bundled with the project.
# Needs no GPU. The first run compiles the C++ library and its Python bindings (8 minutes from a
# fresh clone on 2 busy cores: docs/performance.md); it says what it is doing at each step, and
# shows the compile's progress and a line a minute while it builds. pip's whole output goes to
# .venv/gpudiag-build.log.
set -euo pipefail
cd "$(dirname "$0")/.."
begun=$SECONDS
step() { printf '==> %s\n' "$*"; }
elapsed() { local s=$((SECONDS - begun)); printf '%d min %02d s' $((s / 60)) $((s % 60)); }

step "checking the Debian packages gpudiag builds with (tools/install_deps.sh)"
tools/install_deps.sh
PY=${GPUDIAG_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv with $PY"
  "$PY" -m venv .venv
fi
step "updating pip in .venv"
.venv/bin/python -m pip install -q --upgrade pip

log=.venv/gpudiag-build.log
step "building gpudiag and installing it into .venv: this compiles the C++ library, about 8" \
  "minutes on 2 busy cores the first time (about 2 when run again: the bindings recompile)"
# pip shows nothing of a build without -v, and every compiler command with it: keep its whole
# output in the log and show the phases, the compile's progress in steps of 10 %, and errors.
show_progress() {
  awk '
    /^ *\*\*\* / { sub(/^ */, ""); print "    " $0; fflush(); next }
    /^ *[A-Z][^:]*: started$/ { sub(/^ */, ""); sub(/: started$/, " ..."); print "    " $0; fflush(); next }
    /^(Processing|Successfully installed|Successfully built)/ { print "    " $0; fflush(); next }
    /^ *\[[0-9]+\/[0-9]+\] / {
      split(substr($1, 2), n, "/")
      if (n[2] != total) { total = n[2]; next_pct = 0 }  # ninja restarted with another plan
      pct = int(n[1] * 100 / n[2])
      if (n[1] > 0 && pct >= next_pct) {
        printf "    compiling: %d %% (%d of %d steps)\n", pct, n[1], n[2]; fflush()
        next_pct = pct - pct % 10 + 10
      }
      next
    }
    /(error|ERROR):/ { print "    " $0; fflush() }
  '
}
heartbeat() {
  while sleep 60; do printf '    ... still building (%s so far)\n' "$(elapsed)"; done
}
heartbeat &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
if ! .venv/bin/python -m pip install -v . 2>&1 | tee "$log" | show_progress; then
  kill "$beat" 2>/dev/null || true
  echo "gpudiag: the build failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
kill "$beat" 2>/dev/null || true
step "gpudiag is installed in .venv ($(elapsed)); running gpudiag demo (a simulated recording)"
status=0
.venv/bin/gpudiag demo "$@" || status=$?
cat <<'EOF'

Next: `source .venv/bin/activate`, then `gpudiag analyze <trace or snapshot>`, or
`gpudiag run your_script.py` (sessions and `gpudiag run` need PyTorch in that same environment:
`pip install torch`). README.md, "Use it in your own environment", says more.
EOF
exit "$status"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up gpudiag in .venv and prints the diagnosis of the recording bundled with the project.
# Needs no GPU. The first run compiles the C++ library and its Python bindings (382 s of CPU time
# from a fresh clone: about 3 minutes on 2 idle cores, docs/performance.md); it says what it is
# doing at each step, and shows the compile's progress and a line a minute while it builds. pip's
# whole output goes to .venv/gpudiag-build.log.
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
step "building gpudiag and installing it into .venv: the first time this compiles the C++" \
  "library and its bindings, about 6 minutes of CPU time (3 minutes on 2 idle cores, more on" \
  "busy ones; about 2 when run again: the bindings recompile)"
# pip shows a build only with -v, and then every compiler command: tools/build_progress.awk keeps
# the phases, the compile's progress in steps of 10 % and errors; the log keeps everything.
heartbeat() {
  while sleep 60; do printf '    ... still building (%s so far)\n' "$(elapsed)"; done
}
heartbeat &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
if ! .venv/bin/python -m pip install -v . 2>&1 | tee "$log" | awk -f tools/build_progress.awk; then
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
`gpudiag run your_script.py`. Sessions and `gpudiag run` need PyTorch in that same environment:
`pip install torch` (the CUDA build, about 3 GB), or on a machine without a GPU
`pip install torch --index-url https://download.pytorch.org/whl/cpu`. To put gpudiag where your
torch already is, without compiling there: `tools/build_wheel.sh`, then, in that environment,
`pip install dist/gpudiag-*.whl`. README.md, "Use it in your own environment", says more.
EOF
exit "$status"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up gpudiag in .venv and prints the diagnosis of the recording bundled with the project.
# Needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
PY=${GPUDIAG_PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q .
exec .venv/bin/gpudiag demo "$@"

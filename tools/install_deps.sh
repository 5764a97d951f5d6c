#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages gpudiag builds and tests with (only those missing).
#   tools/install_deps.sh          build + run
#   tools/install_deps.sh --test   also what the test suite needs (GoogleTest, Benchmark, chromium,
#                                  clang for the fuzz targets, clang-tidy 14 for the library's
#                                  checks, tcl for the GPU bundle's SQLite,
#                                  prometheus + promtool for the monitoring test, curl for the
#                                  HTTP control's, ccache so the
#                                  check's gcc builds share one compile of the library)
set -euo pipefail
PACKAGES="build-essential cmake ninja-build pkg-config binutils zlib1g-dev libdeflate-dev
  libsimdjson-dev libfmt-dev libsqlite3-dev pybind11-dev python3-dev python3-venv patch"
if [ "${1:-}" = "--test" ]; then
  # clang: the ASan+UBSan build and the libFuzzer targets (libFuzzer ships with clang).
  PACKAGES="$PACKAGES libgtest-dev libgmock-dev libbenchmark-dev chromium clang clang-format-14 clang-tidy-14 tcl prometheus ccache curl"
fi
command -v dpkg-query >/dev/null || { echo "not a Debian-like system: install the equivalents of: $PACKAGES"; exit 0; }
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  # Without root: say what to run (a prebuilt wheel, tools/build_wheel.sh, needs none of these).
  command -v sudo >/dev/null || {
    echo "missing Debian packages; as root run: apt-get install$missing" >&2; exit 1; }
  SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prepares .devbundle/: everything the GPU machine's build needs that its image may lack, to carry
# with the working tree (the machine reaches no network). Run on a Debian machine that reaches
# Debian's archive and PyPI; never unpacks anything over /.
#
#   tools/prepare_device_bundle.sh            make it (a no-op when it is up to date)
#   tools/prepare_device_bundle.sh --force    make it again
#
# What goes in (sources, built on the GPU machine by its own compiler: its OS and compiler may
# differ from this one, so no binaries travel):
#   src/zlib src/libdeflate src/simdjson src/googletest src/fmt src/sqlite   trimmed upstream
#       sources of Debian's packages (`apt-get source`, the versions this machine's CI builds
#       against; SQLite as the amalgamation its own build makes from them, which needs tclsh
#       here); built into a prefix by tools/devbundle/CMakeLists.txt (see tests/gpu/device_check.sh)
#   python/pybind11            pybind11 from its PyPI wheel, used only where `python3 -m pybind11`
#                              is missing
#   python/include/python3.12  CPython 3.12 headers, used only where the box's Python.h is missing
#   cupti12/libcupti.so.12     the CUPTI of the nvidia-cuda-cupti-cu12 12.9.79 wheel (NVIDIA's own
#                              binary, as PyTorch's cu129 wheels install it): the device check's
#                              ctest_gpu_cupti12 stage forces it with GPUDIAG_CUPTI_PATH
#   src/cpp-httplib            the HTTP control's httplib.h and LICENSE, from Debian's source
#                              package as cmake/GpudiagHttplib.cmake fetches and patches it (the
#                              device check names it in GPUDIAG_HTTPLIB_DIR)
#   MANIFEST.txt               versions, hashes, sizes
# The bundle is about 25 MB; with the repository it must stay under the device tool's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUNDLE=${GPUDIAG_BUNDLE_DIR:-$ROOT/.devbundle}
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
PYBIND11_VERSION=2.13.6
PACKAGES="zlib libdeflate simdjson googletest fmtlib sqlite3"
# The recipe's identity: this script, the CMake project that builds the sources, and the pinned
# cpp-httplib files.
RECIPE=$(cat "$0" tools/devbundle/CMakeLists.txt cmake/GpudiagHttplib.cmake | sha256sum | cut -c1-16)

if [ $FORCE -eq 0 ] && grep -qx "recipe $RECIPE" "$BUNDLE/MANIFEST.txt" 2>/dev/null; then
  echo "device bundle up to date: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1))"
  exit 0
fi

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/gpudiag-devbundle
TMP=$(mktemp -d /tmp/gpudiag-bundle.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$CACHE/lists/partial"

# Debian source packages through a private source list and package lists: the machine's own apt
# configuration is left as it is.
echo "deb-src http://deb.debian.org/debian $(. /etc/os-release && echo "$VERSION_CODENAME") main" \
  > "$CACHE/sources.list"
APT=(-o "Dir::Etc::SourceList=$CACHE/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$CACHE/lists" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${APT[@]}" -qq update
(cd "$TMP" && apt-get "${APT[@]}" -qq source --download-only $PACKAGES)
for p in $PACKAGES; do
  ls "$TMP"/${p}_*.orig.tar.* >/dev/null || { echo "apt-get source $p fetched nothing" >&2; exit 1; }
done

NEW=$TMP/bundle
mkdir -p "$NEW/src" "$NEW/python/include"
# extract PACKAGE DEST PATTERN...: the orig tarball's files matching the patterns (relative to its
# top folder) into src/DEST.
extract() {
  local pkg=$1 dest=$2; shift 2
  local tarball top
  tarball=$(ls "$TMP"/${pkg}_*.orig.tar.*)
  top=$(tar -tf "$tarball" | sed -n '1s|/.*||p')
  mkdir -p "$TMP/x-$pkg" "$NEW/src/$dest"
  tar -xf "$tarball" -C "$TMP/x-$pkg"
  (cd "$TMP/x-$pkg/$top" && for pattern in "$@"; do
     find . -path "./$pattern" -type f; done | sort -u | tar -cf - -T - | tar -xf - -C "$NEW/src/$dest")
}
extract zlib zlib '*.[ch]' LICENSE README
find "$NEW/src/zlib" -mindepth 2 -type f -delete  # top-level library sources only
find "$NEW/src/zlib" -mindepth 1 -type d -empty -delete
extract libdeflate libdeflate 'lib/*' libdeflate.h common_defs.h COPYING
extract simdjson simdjson singleheader/simdjson.h singleheader/simdjson.cpp LICENSE
mv "$NEW/src/simdjson/singleheader/"* "$NEW/src/simdjson/" && rmdir "$NEW/src/simdjson/singleheader"
extract googletest googletest 'googletest/include/*' 'googletest/src/*' LICENSE
mv "$NEW/src/googletest/googletest/"* "$NEW/src/googletest/" && rmdir "$NEW/src/googletest/googletest"
extract fmtlib fmt 'include/fmt/*' LICENSE.rst
# SQLite's amalgamation (sqlite3.c, sqlite3.h), made by SQLite's own build from Debian's sources:
# one C file that any compiler builds, as SQLite itself recommends for embedding.
command -v tclsh >/dev/null || { echo "tclsh is needed to make SQLite's amalgamation (Debian: tcl)" >&2; exit 1; }
sqlite_tarball=$(ls "$TMP"/sqlite3_*.orig.tar.* | grep -v -- '-www')
mkdir -p "$TMP/x-sqlite" "$NEW/src/sqlite"
tar -xf "$sqlite_tarball" -C "$TMP/x-sqlite"
(cd "$TMP"/x-sqlite/sqlite3-* && ./configure --disable-tcl >/dev/null && make sqlite3.c >/dev/null)
cp "$TMP"/x-sqlite/sqlite3-*/sqlite3.c "$TMP"/x-sqlite/sqlite3-*/sqlite3.h "$NEW/src/sqlite/"

# pybind11 from its wheel (pure Python plus headers and CMake files).
PY=$(command -v python3)
"$PY" -m pip download -q --no-deps --only-binary=:all: -d "$TMP/wheel" "pybind11==$PYBIND11_VERSION"
(cd "$TMP/wheel" && "$PY" -m zipfile -e pybind11-*.whl unpacked)
cp -r "$TMP/wheel/unpacked/pybind11" "$NEW/python/pybind11"

# CPython 3.12 headers (the GPU machine's Python is 3.12), from a local 3.12 when one is here.
PY312=""
for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
  # (a pyenv shim exists but fails when 3.12 is not selected: run it to know)
  if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    PY312=$(command -v "$candidate"); break
  fi
done
if [ -n "$PY312" ]; then
  inc=$("$PY312" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [ -f "$inc/Python.h" ] && cp -r "$inc" "$NEW/python/include/python3.12"
fi

# The newest CUPTI 12 (PyTorch's cu129 wheels), library only, for the ctest_gpu_cupti12 stage.
CUPTI12_VERSION=12.9.79
tools/fetch_cupti_libs.sh >/dev/null  # into build/cupti-libs, as for the *Cupti12* tests
mkdir -p "$NEW/cupti12"
cp "build/cupti-libs/$CUPTI12_VERSION/libcupti.so.12" "$NEW/cupti12/"

# cpp-httplib from Debian's source package, fetched, verified and patched by every build's code.
cmake -DGPUDIAG_HTTPLIB_UNPACK_TO="$TMP/x-httplib" -P cmake/GpudiagHttplib.cmake >/dev/null
mkdir -p "$NEW/src/cpp-httplib"
cp "$TMP/x-httplib/src/httplib.h" "$TMP/x-httplib/src/LICENSE" "$NEW/src/cpp-httplib/"

{
  echo "gpudiag device bundle (tools/prepare_device_bundle.sh)"
  echo "recipe $RECIPE"
  echo "made $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME") $(uname -m)"
  for p in $PACKAGES; do
    for f in $(ls "$TMP"/${p}_*.orig.tar.* | grep -v -- '-www'); do
      echo "source $p $(basename "$f") sha256 $(sha256sum "$f" | cut -d' ' -f1)"
    done
  done
  for f in third_party/downloads/cpp-httplib_*; do
    echo "source cpp-httplib $(basename "$f") sha256 $(sha256sum "$f" | cut -d' ' -f1)"
  done
  echo "pybind11 $PYBIND11_VERSION (wheel)"
  echo "libcupti.so.12 of nvidia-cuda-cupti-cu12 $CUPTI12_VERSION sha256 $(sha256sum "$NEW/cupti12/libcupti.so.12" | cut -d' ' -f1)"
  if [ -d "$NEW/python/include/python3.12" ]; then
    echo "python headers $("$PY312" -c 'import platform; print(platform.python_version())') from $PY312"
  else
    echo "python headers: none (no local python3.12)"
  fi
} > "$NEW/MANIFEST.txt"
echo "size $(du -sk "$NEW" | cut -f1) KiB" >> "$NEW/MANIFEST.txt"

rm -rf "$BUNDLE"
mv "$NEW" "$BUNDLE"
cat "$BUNDLE/MANIFEST.txt"

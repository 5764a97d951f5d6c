#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what gpudiag needs, builds it, and runs every test: C++ (GoogleTest via ctest), the
# library's clang-tidy checks, the ASan+UBSan build of the C++ tests with clang (which also builds
# every libFuzzer target and runs each for a short campaign), the TSan run of the concurrency
# tests, the consumers (C++20 and C++17 find_package, C, add_subdirectory) and the C++ example
# built against the installed package, the GPU device check's preflight (tests/gpu/README.md),
# the manylinux wheel and an sdist built with no network, the Python suite (pytest) against the
# wheel, and the lint. Any failure fails the script. This is the README's test command and
# .ci/run's body.
#
#   tools/check.sh            everything
#   tools/check.sh --quick    dev build, ctest and pytest only (for iterating)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
JOBS=${GPUDIAG_JOBS:-$(nproc)}
START=$(date +%s)

step() { printf '\n=== %s (%ds)\n' "$*" $(( $(date +%s) - START )); }

# One gcc compile of the library serves three builds: the ci preset's, the add_subdirectory
# consumer's and the Python wheel's are configured alike (same compiler name, build type, flags and
# -Werror), and ccache hands the objects on, paths taken relative to the checkout.
export CC=${CC:-cc} CXX=${CXX:-c++}
use_ccache() {
  command -v ccache >/dev/null || return 0
  export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
  # The test programs' precompiled <gtest/gtest.h> (tests/CMakeLists.txt): what ccache needs to
  # cache the files compiled with it.
  export CCACHE_SLOPPINESS=pch_defines,time_macros
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
}
# LeakSanitizer's stop-the-world tracer itself now and then segfaults as a process exits ("Tracer
# caught signal 11", google/sanitizers#1353): the test had passed and no report was made. When
# that is the only kind of failure, the failed tests run once more; any sanitizer report, failed
# assertion or other crash fails at once.
#
# The decoder tests on the real libcupti 13 run apart with leak checking off (AddressSanitizer and
# UBSan stay on): under ctest, every time, LeakSanitizer 14's tracer reads a garbage dynamic-TLS
# entry of the main thread at the exit of one of them ("DTLS 4 at 0x66f-...", then signal 11), and
# which one moves as tests are added; the same binary run directly passes clean.
#
# Left out of both sanitizer runs: the whole-corpus comparisons of the split and streamed parses
# with the whole one (single-threaded decoding of every corpus trace: minutes under TSan, the
# longest tests under ASan). They run in the ci build; every corpus trace is still parsed under
# ASan (CorpusRobustness), and the parses' threads are tested on small inputs under TSan.
CORPUS_EXACTNESS="CorpusTracesStreamExactly|CorpusTracesSplitExactly"
LSAN_TRIPS="ActivityDecoderCupti13Test\\..*"
asan_ctest() {
  local log=build/asan/ctest.log
  ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 ctest --preset asan -R "^$LSAN_TRIPS\$" || return 1
  ctest --preset asan -j "$JOBS" --output-log "$log" -E "^$LSAN_TRIPS\$|$CORPUS_EXACTNESS" &&
    return 0
  if grep -q "Tracer caught signal" "$log" &&
     ! grep -qE "ERROR: [A-Za-z]+Sanitizer|runtime error:|\[  FAILED  \]|Segmentation fault|\*\*\*Timeout" "$log"; then
    echo "LeakSanitizer's tracer crashed at a test's exit (the test passed, no report): once more"
    ctest --preset asan --rerun-failed
  else
    return 1
  fi
}

# The ci build's flags, for the consumer and the wheel (the preset owns them).
ci_cache() { sed -n "s/^$1:[A-Z]*=//p" build/ci/CMakeCache.txt; }
same_compile() {
  printf '%s\n' -DCMAKE_BUILD_TYPE=Release -DGPUDIAG_WERROR=ON \
    "-DCMAKE_C_FLAGS_RELEASE=$(ci_cache CMAKE_C_FLAGS_RELEASE)" \
    "-DCMAKE_CXX_FLAGS_RELEASE=$(ci_cache CMAKE_CXX_FLAGS_RELEASE)"
}

# --- system packages (Debian/Ubuntu) -------------------------------------------------------------
step "system packages"
tools/install_deps.sh --test

step "lint"
tools/lint.sh

# --- C++: build and test -------------------------------------------------------------------------
# The real libcupti.so.12 of the nvidia-cuda-cupti-cu12 wheels, for the *Cupti12* tests (pip's
# cache keeps the wheels; only the libraries are unpacked, into build/cupti-libs).
step "CUPTI 12 libraries for the *Cupti12* tests"
tools/fetch_cupti_libs.sh

step "configure + build (ci preset: dev's checks, -O2)"
use_ccache
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$JOBS"
step "ctest (ci)"
ctest --preset ci -j "$JOBS"
mapfile -t SAME_COMPILE < <(same_compile)

if [ $QUICK -eq 0 ]; then
  # The checks .clang-tidy names, on the ci build's compile commands (about 2 minutes on 2 cores).
  step "clang-tidy (the library's .cpp files)"
  GPUDIAG_JOBS=$JOBS tools/clang_tidy.sh build/ci

  step "install + consumers (find_package C++20 and C++17, C, add_subdirectory, example)"
  cmake --install build/ci --prefix build/ci/install >/dev/null
  for consumer in tests/consumer/find_package tests/consumer/cxx17 tests/consumer/c_api \
                  tests/consumer/add_subdirectory examples/cpp/inference_service; do
    [ -d "$consumer" ] || continue
    name=$(basename "$consumer")
    # Configured as the ci build: add_subdirectory's copy of gpudiag is then ccache's.
    cmake -S "$consumer" -B "build/consumer-$name" -G Ninja \
      -DCMAKE_PREFIX_PATH="$ROOT/build/ci/install" "${SAME_COMPILE[@]}" >/dev/null
    cmake --build "build/consumer-$name" -j "$JOBS"
    if [ -f "build/consumer-$name/CTestTestfile.cmake" ]; then
      (cd "build/consumer-$name" && ctest --output-on-failure)
    fi
  done

  # One clang build serves both: the C++ tests under ASan+UBSan (with gcc elsewhere, code only
  # gcc accepts fails here), and the libFuzzer targets, each fuzzed briefly from its seeds so a
  # target that crashes or cannot fuzz fails CI (tools/fuzz_campaign.sh runs long campaigns).
  step "ASan + UBSan build (clang) of the C++ tests and the fuzz targets"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 asan_ctest
  step "fuzz smoke: every target ${GPUDIAG_FUZZ_SECONDS:-5} s (libFuzzer, ASan+UBSan)"
  tools/fuzz_campaign.sh --smoke --build build/asan --seconds "${GPUDIAG_FUZZ_SECONDS:-5}"

  step "TSan run of the concurrency tests"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$JOBS" --target concurrency_tests
  # Left out under TSan as well: the real-CUPTI record tests (single-threaded decoding; they run
  # in the ci and ASan builds).
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --preset tsan -j "$JOBS" \
    -E "$CORPUS_EXACTNESS|RealCupti"

  # The GPU machine's check, rehearsed here: no network, the bundled dependencies only, every
  # GPU stage reported as needing a GPU (tests/gpu/README.md). Its builds reuse ccache.
  step "device check preflight (tests/gpu/device_check.sh --preflight)"
  tools/prepare_device_bundle.sh
  GPUDIAG_JOBS=$JOBS tests/gpu/device_check.sh --preflight | sed 's/^/  /'
fi

# --- Python --------------------------------------------------------------------------------------
if [ -f pyproject.toml ]; then
  step "Python wheel (tools/build_wheel.sh: pip wheel, auditwheel repair), installed into a fresh venv"
  PY=${GPUDIAG_PYTHON:-python3}
  # .venv holds the test tools (pytest, torch, Lightning, ruff, mypy). --system-site-packages:
  # reuse a torch the machine already has (several GB); otherwise pip installs it once and its
  # cache keeps it for the next run.
  [ -x .venv/bin/python ] || "$PY" -m venv --system-site-packages .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # torch is large; pip's cache keeps it to one download per machine.
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q torch
  # Built as the ci build is (in build/<wheel tag>, as deep as build/ci): the library is ccache's.
  CONFIG=()
  [ ${#SAME_COMPILE[@]} -gt 0 ] && CONFIG=(-C cmake.build-type=Release)
  for define in "${SAME_COMPILE[@]}"; do
    case $define in -DCMAKE_BUILD_TYPE=*) ;; *) CONFIG+=(-C "cmake.define.${define#-D}") ;; esac
  done
  rm -f build/wheel/gpudiag-*.whl
  GPUDIAG_WHEEL_TOOLS=.venv tools/build_wheel.sh --python .venv/bin/python --out build/wheel \
    "${CONFIG[@]}" | tee build/wheel.log
  WHEEL=$(tail -n 1 build/wheel.log)
  case $WHEEL in *-manylinux_*.whl) ;; *) echo "not a manylinux wheel: $WHEEL"; exit 1 ;; esac
  # The extras' requirements into .venv, from the wheel (frameworks after torch, so it never pulls
  # one in); .venv's gpudiag is then this wheel's too.
  .venv/bin/python -m pip install -q --force-reinstall --no-deps "$WHEEL"
  .venv/bin/python -m pip install -q "${WHEEL}[test,frameworks,lint,mcp]"
  # The suite runs against the wheel installed into a venv that has seen no build: no index, no
  # dependency, nothing compiled. The test tools are .venv's, found after the venv's own
  # site-packages (a .pth), so the gpudiag imported is the fresh venv's.
  rm -rf build/wheel-venv
  .venv/bin/python -m venv --without-pip build/wheel-venv  # .venv's base Python: the wheel's
  .venv/bin/python -m pip --python build/wheel-venv/bin/python install -q --no-index --no-deps \
    "$WHEEL"
  site=$(build/wheel-venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  .venv/bin/python -c 'import sys; print(*[p for p in sys.path if p.endswith("-packages")], sep="\n")' \
    > "$site/gpudiag-test-tools.pth"
  for module in "$site"/gpudiag/_core.*.so "$site"/gpudiag/lib/libgpudiag.so; do
    echo "ldd ${module#"$site"/}: the wheel's own libraries and the C/C++ runtime only"
    ldd "$module" | sed 's/^/  /'
  done
  # The sdist carries cpp-httplib's sources (cmake/GpudiagHttplib.cmake): built with no index and
  # every proxy dead, a fetch would fail, and GPUDIAG_HTTP=ON makes that fail the build.
  step "sdist (python -m build --sdist) builds with no network"
  cmake -P cmake/GpudiagHttplib.cmake >/dev/null
  .venv/bin/python -m pip install -q build "scikit-build-core>=0.10" "pybind11>=2.10"
  rm -rf build/sdist
  .venv/bin/python -m build --sdist --no-isolation --outdir build/sdist . >/dev/null
  sdist=$(ls build/sdist/gpudiag-*.tar.gz)
  tar -xzf "$sdist" -C build/sdist
  dead=http://127.0.0.1:9
  (cd "${sdist%.tar.gz}" && CCACHE_BASEDIR=$PWD http_proxy=$dead https_proxy=$dead \
     HTTP_PROXY=$dead HTTPS_PROXY=$dead "$ROOT/.venv/bin/python" -m pip wheel -v --no-index \
     --no-build-isolation --no-deps -C cmake.define.GPUDIAG_HTTP=ON "${CONFIG[@]}" \
     -w "$ROOT/build/sdist" . > "$ROOT/build/sdist/build.log" 2>&1) ||
    { tail -n 40 build/sdist/build.log; echo "the sdist did not build offline"; exit 1; }
  ls build/sdist/gpudiag-*.whl

  step "ruff + mypy (the pinned versions of the lint extra)"
  .venv/bin/ruff check python tests/python tests/scenarios examples/python
  .venv/bin/ruff format --check python tests/python tests/scenarios examples/python tools bench
  .venv/bin/mypy
  set +e
  build/wheel-venv/bin/python -m pytest -q tests/python tests/scenarios tests/matrix
  rc=$?
  set -e
  if [ $rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
  [ $rc -eq 0 ] || exit $rc
fi

step "all checks passed"

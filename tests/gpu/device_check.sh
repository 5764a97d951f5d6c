#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one prepared check of live capture on a GPU machine (an H200 box: driver 580, CUDA 13, torch
# 2.11, Python 3.12, cmake, nvcc; no network), and its rehearsal on a CPU machine.
#
#   OUT=/tmp/out tests/gpu/device_check.sh       on the GPU machine (tests/gpu/README.md: how)
#   tests/gpu/device_check.sh --preflight        on a CPU machine, under the GPU machine's limits
#
# It builds the bundled dependencies (.devbundle, tools/prepare_device_bundle.sh), gpudiag, its
# Python module (imported from the build through PYTHONPATH, no pip), the gpu-labelled tests and
# the nvcc workloads, then runs them: the gpu tests, recordings of small CUDA programs judged
# against what they issued, kernel durations against cudaEvents, the launch overhead, an unmodified
# program through CUDA_INJECTION64_PATH, CUPTI's raw buffers, and tests/gpu/torch_check.py (the
# PyTorch evidence and every examples/python scenario). Every stage passes only on evidence.
#
# --preflight runs the same script with no network (a network namespace), with the system's
# copies of the bundled libraries hidden (a mount namespace masks them: a header that is used
# anyway fails the build with #error) and CMake told to accept the bundle's copies only. Stages
# that need a GPU run too, up to where their programs find no device (exit 77): they report
# NEEDS-GPU, never PASS; one that passes without a GPU is a false pass and fails the preflight.
#
# Results, at most 4 files (the device tool returns 8): $OUT/summary.txt, $OUT/device_check.log,
# $OUT/recorded.tar.gz (recordings, reports, raw CUPTI buffers, example logs) and
# $OUT/torch_check.json. Exit status 0 only when every stage passed (NEEDS-GPU allowed in the
# preflight).
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
MODE=device
case "${1:-}" in
  --preflight) MODE=preflight-outer ;;
  --preflight-inner) MODE=preflight ;;
  "") ;;
  *) echo "usage: $0 [--preflight]" >&2; exit 64 ;;
esac
BUNDLE=$ROOT/.devbundle

# ------------------------------------------------------------------ preflight: the sandbox
# The python3 the box has is 3.12: use a local 3.12 when there is one.
preflight_python_dir() {
  local dir=$ROOT/build/preflight-bin py
  mkdir -p "$dir"
  for py in "${GPUDIAG_PREFLIGHT_PYTHON:-}" python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 python3; do
    [ -n "$py" ] || continue
    if "$py" -c 'import sys' 2>/dev/null; then
      ln -sf "$(command -v "$py")" "$dir/python3"
      break
    fi
  done
  echo "$dir"
}

if [ "$MODE" = preflight-outer ]; then
  if [ ! -f "$BUNDLE/MANIFEST.txt" ]; then
    echo "FAIL  preflight: no device bundle in $BUNDLE; run tools/prepare_device_bundle.sh first"
    exit 1
  fi
  PY_DIR=$(preflight_python_dir)
  export PATH="$PY_DIR:$PATH"
  if [ -z "${GPUDIAG_PREFLIGHT_NO_NAMESPACES:-}" ] && unshare --net --mount --fork true 2>/dev/null; then
    exec unshare --net --mount --fork -- env GPUDIAG_PREFLIGHT_SANDBOX=namespaces \
      bash "$ROOT/tests/gpu/device_check.sh" --preflight-inner
  fi
  # No namespaces (not root, or a container without them): CMake still refuses the system's
  # copies (GPUDIAG_DEPS_PREFIX_ONLY), and package clients are pointed at nothing.
  exec env GPUDIAG_PREFLIGHT_SANDBOX=env-only PIP_NO_INDEX=1 http_proxy=http://127.0.0.1:9 \
    https_proxy=http://127.0.0.1:9 bash "$ROOT/tests/gpu/device_check.sh" --preflight-inner
fi

# Paths of the bundled libraries' system copies on Debian/Ubuntu (headers, static libraries,
# CMake packages, sources) and the tools that would find them; runtime .so files stay usable
# (other programs need them): linking one shows up in the NEEDED check after the build.
hide_system_copies() {
  local masks=/tmp/gpudiag-preflight-masks multi
  multi=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  mkdir -p $masks
  mount -t tmpfs none $masks
  printf '#error "system copy hidden by the device-check preflight: use the bundle"\n' > $masks/header.h
  printf 'hidden by the device-check preflight\n' > $masks/library
  printf '#!/bin/sh\necho "pkg-config: hidden by the device-check preflight" >&2\nexit 1\n' > $masks/tool
  chmod +x $masks/tool
  local hidden=() p
  for p in /usr/include/zlib.h /usr/include/zconf.h /usr/include/libdeflate.h /usr/include/simdjson.h \
           /usr/include/sqlite3.h /usr/include/sqlite3ext.h \
           /usr/local/include/zlib.h /usr/local/include/simdjson.h; do
    [ -f "$p" ] && [ ! -L "$p" ] && mount --bind $masks/header.h "$p" && hidden+=("$p")
  done
  for p in /usr/lib/$multi/libz.a /usr/lib/$multi/libdeflate.a /usr/lib/$multi/libsqlite3.a \
           /usr/lib/$multi/libgtest.a \
           /usr/lib/$multi/libgtest_main.a /usr/lib/$multi/libgmock.a /usr/lib/$multi/libgmock_main.a; do
    [ -f "$p" ] && [ ! -L "$p" ] && mount --bind $masks/library "$p" && hidden+=("$p")
  done
  for p in /usr/include/gtest /usr/include/gmock /usr/include/pybind11 /usr/include/fmt \
           /usr/src/googletest /usr/lib/$multi/cmake/GTest /usr/lib/$multi/cmake/simdjson \
           /usr/lib/$multi/cmake/fmt /usr/lib/cmake/pybind11 \
           /usr/share/cmake/pybind11; do
    [ -d "$p" ] && [ ! -L "$p" ] && mount -t tmpfs none "$p" && hidden+=("$p/")
  done
  for p in /usr/bin/pkgconf /usr/bin/pkg-config; do
    [ -f "$p" ] && [ ! -L "$p" ] && mount --bind $masks/tool "$p" && hidden+=("$p")
  done
  echo "${hidden[*]}"
}

# ------------------------------------------------------------------ common set-up
if [ "$MODE" = preflight ]; then
  BUILD=${GPUDIAG_GPU_BUILD:-$ROOT/build/preflight}
  OUT=${OUT:-$ROOT/build/preflight/out}
else
  BUILD=${GPUDIAG_GPU_BUILD:-$ROOT/build/gpu}
  OUT=${OUT:-/tmp/gpudiag-device-check}
fi
DEPS=$BUILD-deps
JOBS=${GPUDIAG_JOBS:-$(nproc)}
WORK=$(mktemp -d /tmp/gpudiag-check.XXXXXX)
REC=$WORK/recorded
mkdir -p "$OUT" "$REC" "$BUILD"
LOG=$OUT/device_check.log
SUMMARY=$OUT/summary.txt
: > "$LOG"
: > "$SUMMARY"
START=$(date +%s)
# Stop starting stages past this (the first run must end within 9 minutes of machine time). The
# stage limits are the GPU machine's (16 cores); a 2-core CPU machine gets them scaled.
if [ "$MODE" = preflight ]; then
  BUDGET=${GPUDIAG_CHECK_BUDGET_S:-3000}; LIMIT_SCALE=${GPUDIAG_LIMIT_SCALE:-8}
else
  BUDGET=${GPUDIAG_CHECK_BUDGET_S:-480}; LIMIT_SCALE=${GPUDIAG_LIMIT_SCALE:-1}
fi
PASSED=0; FAILED=0; NEEDS_GPU=0; SKIPPED=0
# GPUDIAG_CHECK_STAGES=<regex>: run only the stages it names (a rerun on a warm machine), besides
# these, which every later stage needs (and which cost little when the build is still there).
ESSENTIAL="deps_from_bundle|configure|build|needed_entries|nvcc_workloads|python_module"

say() { echo "$*" | tee -a "$SUMMARY"; }
log() { echo "$*" >> "$LOG"; }
elapsed() { echo $(( $(date +%s) - START )); }

# run_limited NAME LIMIT CMD...: runs CMD (a program or a function of this script) with a time
# limit within the budget, logging it. Returns its status (124 when it ran out of time), or 125
# when the budget is spent and it did not run. CMD runs in its own process group, so a time-out
# ends what it started (compilers, ctest's tests) and nothing else.
run_limited() {
  local name=$1 limit=$2; shift 2
  if [ -n "${GPUDIAG_CHECK_STAGES:-}" ] && ! [[ $name =~ ^($GPUDIAG_CHECK_STAGES|$ESSENTIAL)$ ]]; then
    return 126
  fi
  local left=$(( BUDGET - $(elapsed) ))
  limit=$(( limit * LIMIT_SCALE ))
  if [ "$left" -le 10 ]; then return 125; fi
  [ "$limit" -gt "$left" ] && limit=$left
  rm -f "$WORK/note"
  echo "===== $name (limit ${limit}s, at $(elapsed)s) =====" >> "$LOG"
  set -m
  ( "$@" ) >> "$LOG" 2>&1 &
  local pid=$!
  local expired=$WORK/expired.$pid
  ( sleep "$limit"; touch "$expired"; echo "===== $name: time limit ${limit}s reached =====" >> "$LOG"
    kill -TERM -- -"$pid"; sleep 10; kill -KILL -- -"$pid" ) >/dev/null 2>&1 &
  local watchdog=$!
  set +m
  wait "$pid"
  local rc=$?
  [ -e "$expired" ] && rc=124
  kill -- -"$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
  return $rc
}

# stage NAME LIMIT CMD...: a stage that needs no GPU: PASS on exit 0.
stage() {
  local name=$1 t0 rc
  t0=$(date +%s)
  run_limited "$@"; rc=$?
  local secs=$(( $(date +%s) - t0 ))
  if [ $rc -eq 126 ]; then return 0  # not selected (GPUDIAG_CHECK_STAGES)
  elif [ $rc -eq 125 ]; then say "SKIP       $name (time budget spent at $(elapsed)s)"; SKIPPED=$((SKIPPED+1))
  elif [ $rc -eq 0 ]; then say "PASS       $name (${secs}s)"; PASSED=$((PASSED+1))
  else say "FAIL       $name rc=$rc (${secs}s)"; FAILED=$((FAILED+1)); fi
  return $rc
}

# A stage's program may leave one line in $WORK/note for its summary line.
stage_note() {
  [ -s "$WORK/note" ] && printf '; %s' "$(head -1 "$WORK/note")"
  rm -f "$WORK/note"
}

# gpu_stage NAME LIMIT CMD...: a stage that needs a GPU. Its program exits 0 when its evidence
# holds, 77 when it finds no device. On the GPU machine only 0 passes; in the preflight 77 is
# the expected NEEDS-GPU and 0 is a false pass.
gpu_stage() {
  local name=$1 t0 rc
  t0=$(date +%s)
  run_limited "$@"; rc=$?
  local secs=$(( $(date +%s) - t0 ))
  if [ $rc -eq 126 ]; then return 0  # not selected (GPUDIAG_CHECK_STAGES)
  elif [ $rc -eq 125 ]; then say "SKIP       $name (time budget spent at $(elapsed)s)"; SKIPPED=$((SKIPPED+1))
  elif [ "$MODE" = preflight ] && [ $rc -eq 77 ]; then
    say "NEEDS-GPU  $name (built and started$(stage_note); no device: exit 77)"; NEEDS_GPU=$((NEEDS_GPU+1))
  elif [ "$MODE" = preflight ] && [ $rc -eq 0 ]; then
    say "FAIL       $name passed without a GPU: a false pass"; FAILED=$((FAILED+1))
  elif [ $rc -eq 0 ]; then say "PASS       $name (${secs}s$(stage_note))"; PASSED=$((PASSED+1))
  elif [ $rc -eq 77 ]; then say "FAIL       $name found no GPU on the GPU machine"; FAILED=$((FAILED+1))
  else say "FAIL       $name rc=$rc (${secs}s)"; FAILED=$((FAILED+1)); fi
  return $rc
}

finish() {
  cp "$WORK/environment.txt" "$REC/" 2>/dev/null
  cp "$SUMMARY" "$REC/summary.txt" 2>/dev/null
  tar -czf "$OUT/recorded.tar.gz" -C "$WORK" recorded 2>>"$LOG"
  # A returned file holds at most 16 MiB: past 15, the files over 2 MiB travel apart.
  if [ "$(stat -c %s "$OUT/recorded.tar.gz")" -gt $(( 15 << 20 )) ]; then
    (cd "$WORK" && find recorded -type f -size +2M) > "$WORK/large.txt"
    tar -czf "$OUT/recorded.tar.gz" -C "$WORK" -X "$WORK/large.txt" recorded 2>>"$LOG"
    tar -czf "$OUT/recorded_large.tar.gz" -C "$WORK" -T "$WORK/large.txt" 2>>"$LOG"
    say "recorded.tar.gz was over 15 MiB: $(wc -l < "$WORK/large.txt") large files in recorded_large.tar.gz"
  fi
  say "recordings: $(cd "$REC" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
  say "device check ($MODE): $PASSED passed, $FAILED failed, $NEEDS_GPU need a GPU, $SKIPPED skipped; $(elapsed)s"
  say "results in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  rm -rf "$WORK"
  if [ $FAILED -gt 0 ] || [ $SKIPPED -gt 0 ]; then exit 1; fi
  if [ "$MODE" = preflight ] && [ $NEEDS_GPU -eq 0 ]; then exit 1; fi
  exit 0
}

say "gpudiag device check ($MODE) $(date -u +%FT%TZ) on $(uname -m), kernel $(uname -r), $JOBS cores"

# ------------------------------------------------------------------ 0. the sandbox (preflight)
if [ "$MODE" = preflight ]; then
  if [ "${GPUDIAG_PREFLIGHT_SANDBOX:-}" = namespaces ]; then
    say "sandbox: network namespace: links $(ip -o link 2>/dev/null | awk -F': ' '{printf "%s ", $2}')routes $(ip route 2>/dev/null | wc -l)"
    say "hidden system copies: $(hide_system_copies)"
  else
    say "sandbox: no namespaces (unshare unavailable, or GPUDIAG_PREFLIGHT_NO_NAMESPACES set); package clients pointed at nothing, CMake accepts bundled libraries only"
  fi
fi

# ------------------------------------------------------------------ 1. environment, in background
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
CUDA_ROOT=${NVCC:+$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
PY=$(command -v python3)
probe_environment() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu,power.limit --format=csv 2>&1 | head -3
  echo "nvcc: ${NVCC:-none} ($( [ -n "$NVCC" ] && "$NVCC" --version | tail -1))"
  echo "cmake: $(cmake --version | head -1); c++: $(c++ --version 2>/dev/null | head -1)"
  echo "glibc: $(ldd --version 2>/dev/null | head -1)"
  "$PY" - <<'PY' 2>&1
import importlib.util, os, sys, sysconfig
print("python", sys.version.split()[0], sys.executable)
inc = sysconfig.get_paths()["include"]
print("Python.h:", os.path.join(inc, "Python.h") if os.path.exists(os.path.join(inc, "Python.h")) else "missing")
for name in ("pybind11", "torch", "scikit_build_core"):
    print(name + ":", "present" if importlib.util.find_spec(name) else "missing")
def cupti_maps():
    return sorted({l.split()[-1] for l in open("/proc/self/maps") if "cupti" in l}) or "none"
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
    print("libcupti mapped after import torch:", cupti_maps())
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
        print("libcupti mapped after CUDA init:", cupti_maps())
except Exception as e:
    print("torch:", repr(e))
PY
}
probe_environment > "$WORK/environment.txt" 2>&1 &
ENV_PID=$!

# cupti.h: the toolkit's (CUDA 13: include/, CUDA 12: extras/CUPTI/include), else pip's
# nvidia-cuda-cupti next to torch. The build refuses to go on without one.
find_cupti_header() {
  local d
  for d in "$CUDA_ROOT/include" "$CUDA_ROOT/extras/CUPTI/include" \
           "$CUDA_ROOT"/targets/*/include; do
    [ -f "$d/cupti.h" ] && { echo "$d"; return; }
  done
  "$PY" - <<'PY' 2>/dev/null
import glob, site, sys
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for hit in sorted(glob.glob(base + "/nvidia/**/include/cupti.h", recursive=True)):
        print(hit[: -len("/cupti.h")]); sys.exit()
PY
}
CUPTI_INC=$(find_cupti_header)
if [ -z "$CUPTI_INC" ]; then
  say "FAIL       cupti.h found nowhere (nvcc: ${NVCC:-none}); live capture would be built out: stopping"
  FAILED=$((FAILED+1)); wait $ENV_PID; finish
fi
say "cupti.h: $CUPTI_INC/cupti.h"

# The nvcc workloads compile while the dependencies build (they need only headers).
NVCC_ARGS=(-std=c++20 -O2 -arch=sm_90 -Ilibgpudiag/include -I"$CUPTI_INC")
compile_workloads() {
  "$NVCC" "${NVCC_ARGS[@]}" -c tests/gpu/capture_workload.cu -o "$WORK/capture_workload.o" &&
  "$NVCC" "${NVCC_ARGS[@]}" -DGPUDIAG_PLAIN -c tests/gpu/capture_workload.cu -o "$WORK/capture_plain.o"
}
if [ -n "$NVCC" ]; then
  compile_workloads > "$WORK/nvcc.log" 2>&1 &
  NVCC_PID=$!
fi

# ------------------------------------------------------------------ 2. dependencies and build
LAUNCHER=()
if command -v ccache >/dev/null; then
  # Shared across clones: paths below the checkout are hashed relative to it.
  export CCACHE_BASEDIR=$ROOT
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# The GPU machine builds optimised (its overhead figures depend on it); the preflight rehearses
# the same configuration unoptimised, which proves the same things in half the CI time.
BUILD_TYPE=(-DCMAKE_BUILD_TYPE=Release)
if [ "$MODE" = preflight ]; then
  BUILD_TYPE=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0)
fi
build_deps() {
  cmake -S tools/devbundle -B "$DEPS/build" "${GEN[@]}" "${LAUNCHER[@]}" "${BUILD_TYPE[@]}" \
    -DGPUDIAG_BUNDLE_DIR="$BUNDLE" -DCMAKE_INSTALL_PREFIX="$DEPS/prefix" &&
  cmake --build "$DEPS/build" -j "$JOBS" --target install
}
stage deps_from_bundle 150 build_deps

# pybind11 and Python.h: the box's own, else the bundle's.
PYBIND11_DIR=$("$PY" -m pybind11 --cmakedir 2>/dev/null || true)
PY_ARGS=(-DPython_EXECUTABLE="$PY")
if [ -z "$PYBIND11_DIR" ]; then
  PYBIND11_DIR=$BUNDLE/python/pybind11/share/cmake/pybind11
  say "pybind11: the bundle's ($PYBIND11_DIR)"
else
  say "pybind11: python3's ($PYBIND11_DIR)"
fi
PY_INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
PY_VER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ ! -f "$PY_INC/Python.h" ] || [ -n "${GPUDIAG_USE_BUNDLED_PYTHON_HEADERS:-}" ]; then
  if [ -f "$BUNDLE/python/include/python$PY_VER/Python.h" ]; then
    PY_ARGS+=(-DPython_INCLUDE_DIR="$BUNDLE/python/include/python$PY_VER")
    say "Python.h: the bundle's ($BUNDLE/python/include/python$PY_VER)"
  else
    say "Python.h: missing for Python $PY_VER, and not in the bundle"
  fi
fi

CONFIGURE=(cmake -S . -B "$BUILD" "${GEN[@]}" "${LAUNCHER[@]}" "${BUILD_TYPE[@]}"
  -DGPUDIAG_BUILD_TESTS=ON -DGPUDIAG_BUILD_BENCH=OFF -DGPUDIAG_BUILD_PYTHON=ON
  -DGPUDIAG_INSTALL=OFF -DGPUDIAG_DEPS_PREFIX="$DEPS/prefix" -DGPUDIAG_DEPS_PREFIX_ONLY=ON
  -DCUDAToolkit_ROOT="$CUDA_ROOT" -DGPUDIAG_CUPTI_INCLUDE_DIR="$CUPTI_INC"
  -Dpybind11_DIR="$PYBIND11_DIR" -DGPUDIAG_HTTPLIB_DIR="$BUNDLE/src/cpp-httplib" "${PY_ARGS[@]}")
# A fresh cache: what a run finds must not be what an earlier run cached (objects stay for reuse).
rm -f "$BUILD/CMakeCache.txt"
if ! stage configure 90 "${CONFIGURE[@]}"; then
  wait; finish
fi
grep -E "gpudiag dependency:|gpudiag: (cupti.h|no CUDA)" "$LOG" | sed 's/^-- /      /' | tee -a "$SUMMARY"
if ! grep -q "^GPUDIAG_HAVE_CUDA_HEADERS:.*=ON" "$BUILD/CMakeCache.txt" 2>/dev/null &&
   ! grep -q "capture enabled" "$LOG"; then
  say "FAIL       capture is built out (no cupti.h for CMake): stopping"
  FAILED=$((FAILED+1)); wait; finish
fi

GPU_TEST_TARGETS=${GPUDIAG_GPU_TEST_TARGETS:-capture_gpu_test}
stage build 300 cmake --build "$BUILD" -j "$JOBS" --target gpudiag gpudiag_python_stage $GPU_TEST_TARGETS
LIB=$BUILD/libgpudiag/libgpudiag.so
[ -f "$LIB" ] || LIB=$(find "$BUILD" -name 'libgpudiag.so' -not -path '*/python/*' | head -1)

# The bundled libraries are linked in, statically: none of them (nor any NVIDIA library) may be
# a NEEDED entry of what was built.
check_needed() {
  local f bad=0
  for f in "$LIB" "$BUILD"/python/gpudiag/_core*.so; do
    echo "$f: $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    if readelf -d "$f" | grep NEEDED | grep -E "libz\.|libdeflate|libsimdjson|libsqlite3|libfmt|libcuda|libcupti|libnvidia"; then
      bad=1
    fi
  done
  return $bad
}
stage needed_entries 20 check_needed
grep -E "^/.*: " "$LOG" | grep -E "libgpudiag.so:|_core" | sed 's|^'"$BUILD"'/|      |' | tee -a "$SUMMARY" >/dev/null

link_workloads() {
  cat "$WORK/nvcc.log"
  [ "$NVCC_RC" -eq 0 ] || return 1
  "$NVCC" "$WORK/capture_workload.o" -o "$WORK/capture_workload" -L"$(dirname "$LIB")" -lgpudiag \
    -Xlinker -rpath -Xlinker "$(dirname "$LIB")" -ldl &&
  "$NVCC" "$WORK/capture_plain.o" -o "$WORK/capture_plain" -ldl
}
if [ -n "$NVCC" ]; then
  wait "$NVCC_PID"; NVCC_RC=$?
  stage nvcc_workloads 120 link_workloads
else
  say "FAIL       nvcc_workloads: no nvcc"; FAILED=$((FAILED+1))
fi

wait "$ENV_PID"
sed 's/^/      /' "$WORK/environment.txt" | tee -a "$SUMMARY" >> "$LOG"

# ------------------------------------------------------------------ 3. the module, the gpu tests
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
python_module() {
  "$PY" - "$BUILD/python" <<'PY'
import os, sys
import gpudiag
where = os.path.realpath(gpudiag.__file__)
print("gpudiag", gpudiag.__version__, "from", where)
assert where.startswith(os.path.realpath(sys.argv[1])), "not the module built here"
st = gpudiag.status()
print(st)
assert st.live_sessions, "live sessions not built into gpudiag._core"
built_out = [r for r in st.reasons if "built without the CUDA toolkit headers" in r]
assert not built_out, built_out
PY
}
stage python_module 60 python_module

# ctest's own status hides skips (exit 77 and GTEST_SKIP both count as passed): judge its output.
ctest_gpu() {
  local out=$WORK/ctest_gpu.txt
  ctest --test-dir "$BUILD" -L gpu --no-tests=error --timeout 120 -V > "$out" 2>&1
  local rc=$?
  cat "$out"
  local total skipped inner
  total=$(sed -n 's/.*tests passed, [0-9]* tests failed out of \([0-9]*\).*/\1/p' "$out" | tail -1)
  skipped=$(grep -c "\*\*\*Skipped" "$out")
  inner=$(grep -c "\[  SKIPPED \]" "$out")
  echo "ctest gpu: rc=$rc total=${total:-0} skipped(no device)=$skipped skipped(inside)=$inner"
  echo "${total:-0} gpu-labelled tests registered" > "$WORK/note"
  [ $rc -ne 0 ] && return 1
  [ "${total:-0}" -gt 0 ] || return 1
  [ "$skipped" -eq "$total" ] && return 77
  [ "$skipped" -eq 0 ] && [ "$inner" -eq 0 ] || return 1
}
gpu_stage ctest_gpu 180 ctest_gpu
grep -E "^[0-9]+: (STATUS|SUMMARY|  reason|kernels|pool_alloc)|^ctest gpu:" "$LOG" | sed 's/^[0-9]*: /      /' | tail -30 | tee -a "$SUMMARY" >/dev/null
# The CUPTI activity path the captures took, as their capture note says (per-subscriber needs
# libcupti 13.3+ and an R610+ driver: CUDA 13.0's libcupti with driver 580 is process-wide).
say "cupti path: $(grep -m1 -o "cupti_activity: \(per-subscriber\|process-wide\) activity API.*" \
  "$WORK/ctest_gpu.txt" 2>/dev/null || echo "not reported (no capture ran)")"

# The same tests through the CUDA 12 CUPTI of PyTorch's cu129 wheels (the bundle carries it),
# forced with GPUDIAG_CUPTI_PATH: CUPTI 12's record layouts on a real GPU. Passes only when
# every capture ran on that library (its STATUS lines name API version 28).
CUPTI12_LIB=$BUNDLE/cupti12/libcupti.so.12
ctest_gpu_cupti12() {
  GPUDIAG_CUPTI_PATH="$CUPTI12_LIB" ctest_gpu || return $?
  local on12 other
  on12=$(grep -c "STATUS level=cupti_[a-z]* cupti=28 ($CUPTI12_LIB)" "$WORK/ctest_gpu.txt")
  other=$(grep "STATUS level=" "$WORK/ctest_gpu.txt" | grep -vc "cupti=28 ($CUPTI12_LIB)")
  echo "ctest gpu on CUPTI 12: $on12 captures on $CUPTI12_LIB, $other on another"
  [ "$on12" -gt 0 ] && [ "$other" -eq 0 ]
}
if [ -f "$CUPTI12_LIB" ]; then
  gpu_stage ctest_gpu_cupti12 180 ctest_gpu_cupti12
else
  say "FAIL       ctest_gpu_cupti12: $CUPTI12_LIB missing (tools/prepare_device_bundle.sh puts it there)"
  FAILED=$((FAILED+1))
fi

# ------------------------------------------------------------------ 4. recorded workloads
W=$WORK/capture_workload
if [ -x "$W" ]; then
  for mode in memory async vmm kernels copies; do
    gpu_stage "record_$mode" 60 "$W" "$mode" --record "$REC/$mode.gpudiag"
  done
  gpu_stage kernel_times_vs_cudaEvent 60 "$W" timing --record "$REC/timing.gpudiag"
  gpu_stage overhead_launch_loop 90 "$W" overhead --record "$REC/overhead.gpudiag"
  gpu_stage u1_session_before_cuda_init 60 "$W" early --record "$REC/early.gpudiag"
  gpu_stage u4_pause_with_kernel_in_flight 60 "$W" inflight --record "$REC/inflight.gpudiag"
  gpu_stage u5_deep_mode_call_sites 60 "$W" deep --record "$REC/deep.gpudiag"
  CUPTI_LIB=$(grep -m1 -o "^STATUS timing .*cupti=[0-9]* ([^)]*)" "$LOG" | sed 's/.*(\(.*\))/\1/')
  gpu_stage cupti_raw_buffers 60 env GPUDIAG_CUPTI_PATH="$CUPTI_LIB" "$W" cupti-raw --record "$REC/cupti_raw_all.bin"
  grep -E "^(STATUS|SUMMARY|FINDINGS|OVERHEAD|HOSTCLOCK|EVIDENCE FAIL|U[0-9]|CUPTIRAW|RECORDING)" "$LOG" |
    sed 's/^/      /' | tail -60 >> "$SUMMARY"
fi
if [ -x "$WORK/capture_plain" ] && [ -f "$LIB" ]; then
  # An unmodified program: CUDA loads gpudiag at cuInit; NVTX ranges through the same library.
  injected() {
    env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" GPUDIAG_RECORD="$REC/injected.gpudiag" \
      GPUDIAG_REPORT="$REC/injected_report.txt" "$WORK/capture_plain" all || return $?
    "$PY" -c "import gpudiag, sys; r = gpudiag.analyze(sys.argv[1]); print(r.summary())" "$REC/injected.gpudiag"
  }
  gpu_stage injection_unmodified_program 90 injected
  [ -s "$REC/injected_report.txt" ] && head -30 "$REC/injected_report.txt" | sed 's/^/      /' >> "$SUMMARY"
fi

# ------------------------------------------------------------------ 4b. the entry-point matrix
# The cells of tests/matrix/cells.py that only a GPU can show (a sync every step, device memory
# that grows) through each entry point: tests/matrix/matrix.py runs and judges them on their
# reports (exit 77: no CUDA device). About 30 s on the GPU machine.
matrix_gpu() {
  cmake --build "$BUILD" -j "$JOBS" --target gpudiag_matrix_program gpudiag_matrix_plain || return 1
  GPUDIAG_MATRIX_PROGRAM="$BUILD/tests/matrix/gpudiag_matrix_program" \
    "$PY" tests/matrix/matrix.py --gpu --jobs 8 --out "$REC/matrix" > "$WORK/matrix.txt" 2>&1
  local rc=$?
  cat "$WORK/matrix.txt"
  echo "$(grep -c '^MATRIX PASS' "$WORK/matrix.txt") cells passed, $(grep -c '^MATRIX FAIL' "$WORK/matrix.txt") failed" > "$WORK/note"
  return $rc
}
gpu_stage matrix_gpu 60 matrix_gpu
grep -E "^MATRIX" "$LOG" | sed 's/^/      /' | tail -40 >> "$SUMMARY"

# ------------------------------------------------------------------ 5. PyTorch and the examples
TORCH_LIMIT=$(( BUDGET - $(elapsed) - 15 ))
gpu_stage torch_check 400 env OUT="$OUT" GPUDIAG_RECORD_DIR="$REC" \
  GPUDIAG_TORCH_BUDGET_S="$TORCH_LIMIT" "$PY" tests/gpu/torch_check.py
grep -E "^(TORCH|OVERHEAD|PROFILER|GRAPH|EXAMPLE|TIMING|U[0-9]|CHECK)" "$LOG" | sed 's/^/      /' | tail -60 >> "$SUMMARY"

finish

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one prepared GPU check for live capture (<= 8 minutes on an H200 box: driver 580, CUDA 13,
# torch 2.11, Python 3.12, cmake, nvcc; no network). Builds gpudiag (Release, tests on), runs the
# gpu-labelled tests and the NVTX injection test, records real traces of small CUDA programs
# (cudaMalloc, cudaMallocAsync first + pool hit, cuMemCreate/cuMemMap, many tiny kernels,
# pageable vs pinned copies, syncs) through the Session API and through CUDA_INJECTION64_PATH,
# measures launch-loop overhead, runs tests/gpu/torch_check.py when present, and prints a
# compact summary. Every stage reports and the script carries on after a failure.
#
#   OUT=/tmp/out tests/gpu/device_check.sh
# Results (the device tool returns at most 8 files): $OUT/summary.txt, $OUT/device_check.log,
# $OUT/recorded.tar.gz (the .gpudiag recordings and reports: commit them under
# tests/data/recorded/). Optional: .deps/*.deb in the repo root are unpacked first (build
# dependencies the box lacks, downloaded elsewhere with `apt-get download`).
set -u
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=${OUT:-/tmp/gpudiag-device-check}
BUILD=${GPUDIAG_GPU_BUILD:-$ROOT/build/gpu}
WORK=$(mktemp -d /tmp/gpudiag-check.XXXXXX)
REC=$WORK/recorded
mkdir -p "$OUT" "$REC"
LOG=$OUT/device_check.log
SUMMARY=$OUT/summary.txt
: > "$LOG"
: > "$SUMMARY"
START=$(date +%s)
BUDGET=${GPUDIAG_CHECK_BUDGET_S:-470}  # stop starting stages beyond this (8 min total)

say() { echo "$*" | tee -a "$SUMMARY"; }
# stage NAME TIMEOUT_S COMMAND...: runs with a time limit, logs everything, reports one line.
stage() {
  local name=$1 limit=$2; shift 2
  local elapsed=$(( $(date +%s) - START ))
  if [ $(( elapsed + 10 )) -ge "$BUDGET" ]; then
    say "SKIP  $name (time budget spent: ${elapsed}s)"; return 1
  fi
  local left=$(( BUDGET - elapsed ))
  [ "$limit" -gt "$left" ] && limit=$left
  echo "===== $name (limit ${limit}s) =====" >> "$LOG"
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  local secs=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then say "PASS  $name (${secs}s)"; else say "FAIL  $name rc=$rc (${secs}s)"; fi
  return $rc
}

# ---------------------------------------------------------------- 0. environment (G0)
say "gpudiag device check $(date -u +%FT%TZ) on $(hostname) kernel $(uname -r)"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,temperature.gpu,power.limit --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  python3 - <<'PY' 2>&1
import ctypes, os, sys
print("python", sys.version.split()[0])
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
    maps = open("/proc/self/maps").read()
    cupti = sorted({l.split()[-1] for l in maps.splitlines() if "cupti" in l})
    print("libcupti mapped after import torch:", cupti or "no")
    torch.zeros(1, device="cuda")
    maps = open("/proc/self/maps").read()
    print("libcupti mapped after CUDA init:", sorted({l.split()[-1] for l in maps.splitlines() if "cupti" in l}) or "no")
    try:
        h = ctypes.CDLL("libcupti.so.13", mode=os.RTLD_NOLOAD | os.RTLD_LOCAL if hasattr(os, "RTLD_NOLOAD") else 0)
        v = ctypes.c_uint32(); h.cuptiGetVersion(ctypes.byref(v)); print("cuptiGetVersion (torch's):", v.value)
    except OSError as e:
        print("RTLD_NOLOAD libcupti.so.13:", e)
except Exception as e:
    print("torch:", e)
PY
  pip show nvidia-cuda-cupti nvidia-cuda-cupti-cu13 2>/dev/null | grep -E "^(Name|Version|Location)"
} > "$WORK/environment.txt" 2>&1
tee -a "$SUMMARY" < "$WORK/environment.txt" | tee -a "$LOG"

# ---------------------------------------------------------------- 1. dependencies and build
if ls .deps/*.deb >/dev/null 2>&1; then
  for f in .deps/*.deb; do dpkg -x "$f" / ; done; ldconfig
  say "unpacked $(ls .deps/*.deb | wc -l) packages from .deps/"
fi
GEN=""
command -v ninja >/dev/null && GEN="-G Ninja"
CUDA_ARGS="-DCMAKE_BUILD_TYPE=Release -DGPUDIAG_BUILD_BENCH=OFF -DGPUDIAG_INSTALL=OFF"
if stage configure 90 cmake -S . -B "$BUILD" $GEN $CUDA_ARGS -DGPUDIAG_BUILD_TESTS=ON; then
  TESTS=1
else
  say "      (retrying without tests: GoogleTest missing?)"
  rm -rf "$BUILD"
  stage configure_no_tests 60 cmake -S . -B "$BUILD" $GEN $CUDA_ARGS -DGPUDIAG_BUILD_TESTS=OFF
  TESTS=0
fi
if [ "$TESTS" = 1 ]; then
  stage build 240 cmake --build "$BUILD" -j "$(nproc)" --target gpudiag capture_gpu_test \
    capture_unit_test capture_stub_test capture_no_driver_test nvtx_inject_app
else
  stage build 180 cmake --build "$BUILD" -j "$(nproc)" --target gpudiag
fi
LIB=$(ls "$BUILD"/libgpudiag/libgpudiag.so 2>/dev/null)
if [ -n "$LIB" ]; then
  say "NEEDED of libgpudiag.so: $(readelf -d "$LIB" | grep NEEDED | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- 2. tests
if [ "$TESTS" = 1 ]; then
  stage ctest_gpu 150 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 120
  grep -E "^(STATUS|SUMMARY|  reason|kernels|pool_alloc)" "$LOG" | sed 's/^/      /' | tail -40 | tee -a "$SUMMARY" >/dev/null
  stage ctest_capture_cpu 90 ctest --test-dir "$BUILD" --output-on-failure --timeout 60 \
    -R "capture\.|ActivityDecoder|CaptureStub|NvtxReceiver|HealthAnalyzer|LinkHygiene|ApiWhitelist"
fi

# ---------------------------------------------------------------- 3. recorded traces
if [ -n "$LIB" ]; then
  NVCC_ARGS="-std=c++20 -O2 -arch=sm_90 -Ilibgpudiag/include"
  stage nvcc_workload 120 nvcc $NVCC_ARGS tests/gpu/capture_workload.cu -o "$WORK/capture_workload" \
    -L"$(dirname "$LIB")" -lgpudiag -lcuda -Xlinker -rpath -Xlinker "$(dirname "$LIB")"
  stage nvcc_plain 90 nvcc $NVCC_ARGS -DGPUDIAG_PLAIN tests/gpu/capture_workload.cu -o "$WORK/capture_plain" -lcuda
  if [ -x "$WORK/capture_workload" ]; then
    for mode in memory async vmm kernels copies; do
      stage "record_$mode" 60 "$WORK/capture_workload" "$mode" --record "$REC/$mode.gpudiag"
    done
    stage overhead_launch_loop 90 "$WORK/capture_workload" overhead --record "$REC/overhead.gpudiag"
    grep -E "^(STATUS|SUMMARY|FINDINGS|OVERHEAD)" "$LOG" | sed 's/^/      /' | tail -30 >> "$SUMMARY"
  fi
  if [ -x "$WORK/capture_plain" ]; then
    # An unmodified program: CUDA loads gpudiag at cuInit; NVTX ranges through the same library.
    stage injection_unmodified_program 90 env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" \
      GPUDIAG_RECORD="$REC/injected.gpudiag" GPUDIAG_REPORT="$REC/injected_report.txt" \
      "$WORK/capture_plain" all
    [ -s "$REC/injected_report.txt" ] && head -40 "$REC/injected_report.txt" | sed 's/^/      /' >> "$SUMMARY"
  fi
fi

# ---------------------------------------------------------------- 4. torch (Python engineer's)
# ===== TORCH SECTION: runs tests/gpu/torch_check.py when it exists (torch.profiler before and
# after gpudiag, overhead on a training loop vs torch.profiler's own overhead). It receives the
# built library and where to put recordings through the environment.
if [ -f tests/gpu/torch_check.py ]; then
  stage torch_check 180 env PYTHONUNBUFFERED=1 GPUDIAG_LIBRARY="$LIB" GPUDIAG_BUILD_DIR="$BUILD" \
    GPUDIAG_RECORD_DIR="$REC" python3 tests/gpu/torch_check.py
  grep -E "^(TORCH|OVERHEAD|PROFILER|STATUS)" "$LOG" | sed 's/^/      /' | tail -30 >> "$SUMMARY"
else
  say "SKIP  torch_check (tests/gpu/torch_check.py not present yet)"
fi
# ===== END TORCH SECTION

# ---------------------------------------------------------------- 5. results
cp "$WORK/environment.txt" "$REC/" 2>/dev/null
tar -czf "$OUT/recorded.tar.gz" -C "$WORK" recorded 2>>"$LOG"
say "recordings: $(ls "$REC" | tr '\n' ' ')"
say "total $(( $(date +%s) - START ))s; results in $OUT (summary.txt, device_check.log, recorded.tar.gz)"
rm -rf "$WORK"
exit 0

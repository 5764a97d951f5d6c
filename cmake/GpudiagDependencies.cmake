# SPDX-License-Identifier: Apache-2.0
# Third-party libraries, all from the system (Debian: zlib1g-dev libdeflate-dev libsimdjson-dev
# libsqlite3-dev).
# No NVIDIA library is linked: capture dlopens libcupti, libcuda and NVML at run time, and only the
# CUDA toolkit's headers are used, when present.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)
find_package(simdjson REQUIRED)
# Nsight Systems reports are exported as SQLite databases, read through the SQLite library itself.
find_package(SQLite3 REQUIRED)

# No fmt: the library formats a handful of numbers and units (support/format.cpp), which snprintf
# does in a few lines; linking fmt, even privately, would add a dependency for no gain.

# CUDA toolkit headers (cupti.h, nvtx3, nvml.h) for the capture layer; never its libraries.
find_package(CUDAToolkit QUIET)
set(GPUDIAG_CUDA_INCLUDE_DIRS "")
if(CUDAToolkit_FOUND AND EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cupti.h")
  set(GPUDIAG_HAVE_CUDA_HEADERS ON)
  set(GPUDIAG_CUDA_INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS})
  message(STATUS "gpudiag: CUDA headers from ${CUDAToolkit_INCLUDE_DIRS} (capture enabled)")
else()
  set(GPUDIAG_HAVE_CUDA_HEADERS OFF)
  message(STATUS "gpudiag: no CUDA toolkit headers; live capture is built out, analysis stays")
endif()

# SPDX-License-Identifier: Apache-2.0
# Third-party libraries, all from the system (Debian: zlib1g-dev libdeflate-dev libsimdjson-dev
# libfmt-dev).
# No NVIDIA library is linked: capture dlopens libcupti, libcuda and NVML at run time, and only the
# CUDA toolkit's headers are used, when present.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)
find_package(simdjson REQUIRED)

# fmt formats every number and message the library writes. It is used header-only
# (fmt::fmt-header-only: FMT_HEADER_ONLY) and privately, so its code is compiled into our objects
# with hidden visibility: neither libgpudiag.so, nor libgpudiag.a, nor the installed CMake package
# asks a consumer for fmt (tests/consumer builds against the installed package without it).
# Linking a static libfmt.a into ours would do the same, but Debian's libfmt-dev ships only the
# shared library. Public headers never include fmt (tools/lint.sh).
find_package(fmt 9 REQUIRED)

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

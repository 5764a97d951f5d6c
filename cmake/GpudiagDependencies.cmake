# SPDX-License-Identifier: Apache-2.0
# Third-party libraries, all from the system (Debian: zlib1g-dev libdeflate-dev libsimdjson-dev
# libfmt-dev). No NVIDIA library is linked: capture dlopens libcupti, libcuda and NVML at run time,
# and only the CUDA toolkit's headers are used, when present.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)
find_package(simdjson REQUIRED)

# fmt is optional: where the system has it, gpudiag formats through it (header-only, private, so a
# host process with its own fmt never sees our symbols); elsewhere through snprintf.
find_package(fmt QUIET)
if(fmt_FOUND)
  message(STATUS "gpudiag: using system fmt ${fmt_VERSION}")
endif()

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

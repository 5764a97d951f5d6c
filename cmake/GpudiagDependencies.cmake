# SPDX-License-Identifier: Apache-2.0
# Third-party libraries: zlib, libdeflate, simdjson, fmt, SQLite (and GoogleTest for the tests),
# from the system (Debian: zlib1g-dev libdeflate-dev libsimdjson-dev libfmt-dev libsqlite3-dev
# libgtest-dev) or from GPUDIAG_DEPS_PREFIX.
# No NVIDIA library is linked: capture dlopens libcupti, libcuda and NVML at run time, and only the
# CUDA toolkit's headers are used, when present.

# A prefix holding the libraries, searched before the system: the GPU machine has no package
# manager to reach, so tests/gpu/device_check.sh builds one from the device bundle
# (tools/prepare_device_bundle.sh, tools/devbundle/) and points here. With
# GPUDIAG_DEPS_PREFIX_ONLY, a library found anywhere else is an error, not a silent substitute.
set(GPUDIAG_DEPS_PREFIX "" CACHE PATH "Prefix searched first for zlib, libdeflate, simdjson, GTest")
option(GPUDIAG_DEPS_PREFIX_ONLY "Fail when a third-party library is not from GPUDIAG_DEPS_PREFIX" OFF)
if(GPUDIAG_DEPS_PREFIX)
  get_filename_component(GPUDIAG_DEPS_PREFIX "${GPUDIAG_DEPS_PREFIX}" ABSOLUTE)
  list(PREPEND CMAKE_PREFIX_PATH "${GPUDIAG_DEPS_PREFIX}")
endif()

find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(simdjson REQUIRED)
# Nsight Systems reports are exported as SQLite databases, read through the SQLite library itself.
find_package(SQLite3 REQUIRED)

# fmt formats every number and message the library writes. It is used header-only
# (fmt::fmt-header-only: FMT_HEADER_ONLY) and privately, so its code is compiled into our objects
# with hidden visibility: neither libgpudiag.so, nor libgpudiag.a, nor the installed CMake package
# asks a consumer for fmt (tests/consumer builds against the installed package without it).
# Linking a static libfmt.a into ours would do the same, but Debian's libfmt-dev ships only the
# shared library. Public headers never include fmt (tools/lint.sh).
find_package(fmt 9 REQUIRED)

# libdeflate ships no CMake package before 1.15 (Debian 12 has 1.14) and the GPU machine may have no
# pkg-config, so it is found by file; pkg-config, where present, only adds hints.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(_GPUDIAG_PC_LIBDEFLATE QUIET libdeflate)
endif()
find_path(GPUDIAG_LIBDEFLATE_INCLUDE_DIR libdeflate.h HINTS ${_GPUDIAG_PC_LIBDEFLATE_INCLUDE_DIRS})
find_library(GPUDIAG_LIBDEFLATE_LIBRARY NAMES deflate libdeflate
             HINTS ${_GPUDIAG_PC_LIBDEFLATE_LIBRARY_DIRS})
if(NOT GPUDIAG_LIBDEFLATE_INCLUDE_DIR OR NOT GPUDIAG_LIBDEFLATE_LIBRARY)
  message(FATAL_ERROR "gpudiag: libdeflate not found (Debian: libdeflate-dev; or GPUDIAG_DEPS_PREFIX)")
endif()
if(NOT TARGET libdeflate::libdeflate)
  add_library(libdeflate::libdeflate UNKNOWN IMPORTED)
  set_target_properties(libdeflate::libdeflate PROPERTIES
    IMPORTED_LOCATION "${GPUDIAG_LIBDEFLATE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${GPUDIAG_LIBDEFLATE_INCLUDE_DIR}")
endif()
set(LIBDEFLATE_LINK_LIBRARIES "${GPUDIAG_LIBDEFLATE_LIBRARY}")

if(GPUDIAG_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# Where each library came from, in one line the device check reads (and a person can check).
get_target_property(_gpudiag_simdjson_location simdjson::simdjson LOCATION)
set(_gpudiag_dep_paths
  "zlib=${ZLIB_INCLUDE_DIRS}|${ZLIB_LIBRARIES}"
  "libdeflate=${GPUDIAG_LIBDEFLATE_INCLUDE_DIR}|${GPUDIAG_LIBDEFLATE_LIBRARY}"
  "simdjson=${simdjson_DIR}|${_gpudiag_simdjson_location}"
  "fmt=${fmt_DIR}"
  "sqlite=${SQLite3_INCLUDE_DIRS}|${SQLite3_LIBRARIES}")
if(GPUDIAG_BUILD_TESTS)
  get_target_property(_gpudiag_gtest_location GTest::gtest LOCATION)
  get_target_property(_gpudiag_gtest_include GTest::gtest INTERFACE_INCLUDE_DIRECTORIES)
  list(APPEND _gpudiag_dep_paths "gtest=${_gpudiag_gtest_include}|${_gpudiag_gtest_location}")
endif()
foreach(_dep IN LISTS _gpudiag_dep_paths)
  message(STATUS "gpudiag dependency: ${_dep}")
  if(GPUDIAG_DEPS_PREFIX_ONLY)
    string(REGEX REPLACE "^[^=]*=" "" _paths "${_dep}")
    string(REPLACE "|" ";" _paths "${_paths}")
    foreach(_path IN LISTS _paths)
      cmake_path(IS_PREFIX GPUDIAG_DEPS_PREFIX "${_path}" NORMALIZE _inside)
      if(NOT _inside)
        message(FATAL_ERROR "gpudiag: ${_dep} is not from GPUDIAG_DEPS_PREFIX=${GPUDIAG_DEPS_PREFIX}")
      endif()
    endforeach()
  endif()
endforeach()

# The prefix holds static libraries: keep their symbols inside gpudiag's shared objects, so a
# process that also loads the system's zlib never mixes the two copies' functions.
if(GPUDIAG_DEPS_PREFIX AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  string(APPEND CMAKE_SHARED_LINKER_FLAGS " -Wl,--exclude-libs,ALL")
  string(APPEND CMAKE_MODULE_LINKER_FLAGS " -Wl,--exclude-libs,ALL")
endif()


# CUDA toolkit headers (cupti.h, cuda.h, nvtx3) for the capture layer; never its libraries. CUDA 13
# keeps cupti.h in include/, CUDA 12 in extras/CUPTI/include; GPUDIAG_CUPTI_INCLUDE_DIR names
# another folder (pip's nvidia-cuda-cupti, say). Never a stray copy found on the default paths.
find_package(CUDAToolkit QUIET)
set(GPUDIAG_CUPTI_INCLUDE_DIR "" CACHE PATH "Folder holding cupti.h, when not in the CUDA toolkit")
set(GPUDIAG_CUDA_INCLUDE_DIRS "")
set(GPUDIAG_HAVE_CUDA_HEADERS OFF)
if(CUDAToolkit_FOUND)
  find_path(GPUDIAG_CUPTI_HEADER_DIR cupti.h
    HINTS ${GPUDIAG_CUPTI_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS}
          "${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include" "${CUDAToolkit_TARGET_DIR}/extras/CUPTI/include"
    NO_DEFAULT_PATH)
  find_path(GPUDIAG_NVTX3_HEADER_DIR nvtx3/nvToolsExt.h HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(GPUDIAG_CUPTI_HEADER_DIR AND GPUDIAG_NVTX3_HEADER_DIR)
    set(GPUDIAG_HAVE_CUDA_HEADERS ON)
    set(GPUDIAG_CUDA_INCLUDE_DIRS ${GPUDIAG_CUPTI_HEADER_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    list(REMOVE_DUPLICATES GPUDIAG_CUDA_INCLUDE_DIRS)
  endif()
endif()
if(GPUDIAG_HAVE_CUDA_HEADERS)
  message(STATUS "gpudiag: cupti.h from ${GPUDIAG_CUPTI_HEADER_DIR}, CUDA headers from "
                 "${CUDAToolkit_INCLUDE_DIRS} (capture enabled)")
else()
  message(STATUS "gpudiag: no CUDA toolkit headers (cupti.h: ${GPUDIAG_CUPTI_HEADER_DIR}, nvtx3: "
                 "${GPUDIAG_NVTX3_HEADER_DIR}); live capture is built out, analysis stays")
endif()

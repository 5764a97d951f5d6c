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

# A missing library is named with the Debian package that has it: CMake's own message names only
# files it looked for.
macro(gpudiag_missing_dependency what debian_package)
  message(FATAL_ERROR "gpudiag: ${what} not found. Debian/Ubuntu: apt-get install ${debian_package} "
                      "(tools/install_deps.sh installs every package gpudiag builds with); elsewhere, "
                      "point GPUDIAG_DEPS_PREFIX or CMAKE_PREFIX_PATH at it.")
endmacro()
macro(gpudiag_find_dependency package debian_package)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    string(JOIN " " _gpudiag_what ${package} ${ARGN})
    gpudiag_missing_dependency("${_gpudiag_what}" ${debian_package})
  endif()
endmacro()

find_package(Threads REQUIRED)
gpudiag_find_dependency(ZLIB zlib1g-dev)
gpudiag_find_dependency(simdjson libsimdjson-dev)
# Nsight Systems reports are exported as SQLite databases, read through the SQLite library itself.
gpudiag_find_dependency(SQLite3 libsqlite3-dev)

# fmt formats every number and message the library writes, privately: neither libgpudiag.so, nor
# libgpudiag.a, nor the installed CMake package asks a consumer for fmt (tests/consumer builds
# against the installed package without it), and public headers never include it (tools/lint.sh).
# Only fmt's headers are used (Debian's libfmt-dev ships no static archive, and the device
# bundle only headers), but not header-only: FMT_HEADER_ONLY compiled fmt's implementation into
# each of the ~80 files that include it: a third of a fresh build's CPU time. Instead
# gpudiag_fmt names the headers alone, and libgpudiag/third_party/fmt_format.cpp compiles the
# implementation once, hidden inside our objects like the rest.
gpudiag_find_dependency(fmt libfmt-dev 9)
if(NOT TARGET gpudiag_fmt)
  get_target_property(_gpudiag_fmt_include fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
  add_library(gpudiag_fmt INTERFACE IMPORTED)
  set_target_properties(gpudiag_fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_gpudiag_fmt_include}")
endif()

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
  gpudiag_missing_dependency(libdeflate libdeflate-dev)
endif()
if(NOT TARGET libdeflate::libdeflate)
  add_library(libdeflate::libdeflate UNKNOWN IMPORTED)
  set_target_properties(libdeflate::libdeflate PROPERTIES
    IMPORTED_LOCATION "${GPUDIAG_LIBDEFLATE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${GPUDIAG_LIBDEFLATE_INCLUDE_DIR}")
endif()
set(LIBDEFLATE_LINK_LIBRARIES "${GPUDIAG_LIBDEFLATE_LIBRARY}")

if(GPUDIAG_BUILD_TESTS)
  gpudiag_find_dependency(GTest libgtest-dev)
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

include(GpudiagHttplib)

# The files libgpudiag links (libgpudiag/CMakeLists.txt). With GPUDIAG_STATIC_DEPS, the wheel's
# choice (pyproject.toml), each is the static archive beside the shared library where the system
# has one (Debian: libz.a, libdeflate.a and libsqlite3.a of the -dev packages), so the wheel runs on
# machines without them; one with no archive (Debian's simdjson) stays shared, and
# tools/build_wheel.sh's `auditwheel repair` copies it into the wheel.
option(GPUDIAG_STATIC_DEPS "Link third-party libraries from their static archives where present" OFF)
set(GPUDIAG_THIRD_PARTY_LIBRARIES "")
set(_gpudiag_static "")
set(_gpudiag_shared "")
foreach(_library IN LISTS ZLIB_LIBRARIES LIBDEFLATE_LINK_LIBRARIES SQLite3_LIBRARIES
                          _gpudiag_simdjson_location)
  string(REGEX REPLACE "\\.so(\\.[0-9.]+)?$" ".a" _archive "${_library}")
  if(GPUDIAG_STATIC_DEPS AND EXISTS "${_archive}")
    set(_library "${_archive}")
  endif()
  list(APPEND GPUDIAG_THIRD_PARTY_LIBRARIES "${_library}")
  get_filename_component(_name "${_library}" NAME)
  if(_name MATCHES "\\.a$")
    list(APPEND _gpudiag_static "${_name}")
  else()
    list(APPEND _gpudiag_shared "${_name}")
  endif()
endforeach()
if(GPUDIAG_STATIC_DEPS)
  list(JOIN _gpudiag_static " " _gpudiag_static)
  message(STATUS "gpudiag: static third-party libraries: ${_gpudiag_static}")
  if(_gpudiag_shared)
    list(JOIN _gpudiag_shared " " _gpudiag_shared)
    message(STATUS "gpudiag: no static archive, linked shared (a wheel's auditwheel repair copies "
                   "them into it): ${_gpudiag_shared}")
  endif()
endif()

# Static libraries (the prefix's, or GPUDIAG_STATIC_DEPS's): keep their symbols inside gpudiag's
# shared objects, so a process that also loads the system's zlib never mixes the two copies'
# functions. This also lets Debian's archives, compiled as position-independent executable code,
# link into a shared object: their symbols become local, which is what that code assumes.
if((GPUDIAG_DEPS_PREFIX OR GPUDIAG_STATIC_DEPS) AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
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

# SPDX-License-Identifier: Apache-2.0
# cpp-httplib parses the requests of a session's HTTP control (SessionOptions::http). It is used
# header-only, compiled into api/http_server.cpp without TLS, zlib or brotli: a loopback control
# needs none of them, and libgpudiag (and so the wheel) then loads nothing beyond libc and
# libstdc++. Debian packages cpp-httplib only as a shared library built with OpenSSL, zlib and
# brotli, so the header comes from Debian's source package instead: trixie's cpp-httplib 0.18.7
# with the security patches Debian applies to it. The two files are fetched once into
# third_party/downloads/ (where an sdist carries them, for an offline build), checked against the
# SHA-256 below, and unpacked and patched in the build folder.
#
#   GPUDIAG_HTTP        ON (fail when the header cannot be had), OFF, or AUTO (go without, and say).
#   GPUDIAG_HTTPLIB_DIR a folder holding a header-only httplib.h 0.18 to use instead (no fetch).
#   cmake -P cmake/GpudiagHttplib.cmake   only fetches (before `python -m build --sdist`);
#     with -DGPUDIAG_HTTPLIB_UNPACK_TO=DIR also unpacks and patches, httplib.h into DIR/src.
#
# Sets GPUDIAG_HAVE_HTTP, GPUDIAG_HTTPLIB_INCLUDE_DIR and GPUDIAG_HTTPLIB_DEFINES.

# Debian removes a superseded revision's files from its pool: a trixie update of cpp-httplib
# means new names and hashes here (Sources of trixie/main lists both).
set(_gpudiag_httplib_version 0.18.7)
set(_gpudiag_httplib_pool "https://deb.debian.org/debian/pool/main/c/cpp-httplib")
set(_gpudiag_httplib_files
  "cpp-httplib_0.18.7.orig.tar.xz=c88f6495da71e778c82c22995b547a92ceb41cc4016f9028df67106a24b9210d"
  "cpp-httplib_0.18.7-1+deb13u1.debian.tar.xz=00ea33189a7421a434b6d9ccb431ef4debce086534d249e8efa89050e7593198")
get_filename_component(_gpudiag_source_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(_gpudiag_httplib_downloads "${_gpudiag_source_root}/third_party/downloads")

# Fetches the source package's files that are not already there, verified; sets `ok` and `why`.
function(gpudiag_fetch_httplib ok why)
  foreach(_entry IN LISTS _gpudiag_httplib_files)
    string(REGEX REPLACE "=.*$" "" _name "${_entry}")
    string(REGEX REPLACE "^[^=]*=" "" _sha256 "${_entry}")
    set(_file "${_gpudiag_httplib_downloads}/${_name}")
    if(EXISTS "${_file}")
      file(SHA256 "${_file}" _have)
      if(_have STREQUAL _sha256)
        continue()
      endif()
    endif()
    message(STATUS "gpudiag: fetching ${_gpudiag_httplib_pool}/${_name}")
    # A file of its own per build folder, renamed into place (over a damaged one): builds
    # configuring at once never read each other's half-written download.
    string(SHA1 _tag "${CMAKE_BINARY_DIR}")
    string(SUBSTRING "${_tag}" 0 12 _tag)
    file(DOWNLOAD "${_gpudiag_httplib_pool}/${_name}" "${_file}.${_tag}.part"
         TIMEOUT 60 INACTIVITY_TIMEOUT 20 STATUS _status)
    list(GET _status 0 _code)
    set(_have "")
    if(_code EQUAL 0)
      file(SHA256 "${_file}.${_tag}.part" _have)
    endif()
    if(NOT _have STREQUAL _sha256)
      file(REMOVE "${_file}.${_tag}.part")
      if(_code EQUAL 0)
        set(_status "SHA-256 ${_have}, expected ${_sha256}")
      endif()
      set(${ok} OFF PARENT_SCOPE)
      set(${why} "cannot fetch ${_gpudiag_httplib_pool}/${_name} (${_status}); put the files \
cmake/GpudiagHttplib.cmake lists in ${_gpudiag_httplib_downloads}/, or name a header-only \
httplib.h's folder in GPUDIAG_HTTPLIB_DIR" PARENT_SCOPE)
      return()
    endif()
    file(RENAME "${_file}.${_tag}.part" "${_file}")
  endforeach()
  set(${ok} ON PARENT_SCOPE)
endfunction()

# Unpacks the upstream sources into root/src and applies Debian's patches in the order of their
# series file, once per root; sets `dir` to the folder holding httplib.h, or `why`.
function(gpudiag_unpack_httplib _root dir why)
  set(${dir} "${_root}/src" PARENT_SCOPE)
  if(EXISTS "${_root}/patched.stamp")
    file(READ "${_root}/patched.stamp" _stamp)
    if(_stamp STREQUAL "${_gpudiag_httplib_files}")  # made from these very files
      return()
    endif()
  endif()
  find_program(GPUDIAG_PATCH_EXECUTABLE patch)
  if(NOT GPUDIAG_PATCH_EXECUTABLE)
    set(${why} "no `patch` program to apply Debian's fixes to cpp-httplib (Debian: apt-get install \
patch)" PARENT_SCOPE)
    return()
  endif()
  file(REMOVE_RECURSE "${_root}")
  foreach(_entry IN LISTS _gpudiag_httplib_files)
    string(REGEX REPLACE "=.*$" "" _name "${_entry}")
    file(ARCHIVE_EXTRACT INPUT "${_gpudiag_httplib_downloads}/${_name}" DESTINATION "${_root}/unpacked")
  endforeach()
  # The upstream tarball holds one folder named after the commit it was made from.
  file(GLOB _upstream LIST_DIRECTORIES true "${_root}/unpacked/*/httplib.h")
  get_filename_component(_upstream "${_upstream}" DIRECTORY)
  file(RENAME "${_upstream}" "${_root}/src")
  file(STRINGS "${_root}/unpacked/debian/patches/series" _series REGEX "^[^#]")
  foreach(_patch IN LISTS _series)
    execute_process(COMMAND "${GPUDIAG_PATCH_EXECUTABLE}" -p1 --batch --forward --silent
                            -i "${_root}/unpacked/debian/patches/${_patch}"
                    WORKING_DIRECTORY "${_root}/src" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                    ERROR_VARIABLE _out)
    if(NOT _rc EQUAL 0)
      set(${why} "Debian's ${_patch} does not apply to cpp-httplib: ${_out}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  file(WRITE "${_root}/patched.stamp" "${_gpudiag_httplib_files}")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  gpudiag_fetch_httplib(_ok _why)
  if(NOT _ok)
    message(FATAL_ERROR "gpudiag: ${_why}")
  endif()
  message(STATUS "gpudiag: cpp-httplib's sources are in ${_gpudiag_httplib_downloads}")
  if(GPUDIAG_HTTPLIB_UNPACK_TO)
    gpudiag_unpack_httplib("${GPUDIAG_HTTPLIB_UNPACK_TO}" _dir _why)
    if(_why)
      message(FATAL_ERROR "gpudiag: ${_why}")
    endif()
    message(STATUS "gpudiag: cpp-httplib, patched, is in ${_dir}")
  endif()
  return()
endif()

set(GPUDIAG_HTTP "AUTO" CACHE STRING "HTTP control of sessions (cpp-httplib): ON, OFF or AUTO")
set(GPUDIAG_HTTPLIB_DIR "" CACHE PATH "Folder holding a header-only httplib.h 0.18 (instead of the fetch)")
set(GPUDIAG_HAVE_HTTP OFF)
set(GPUDIAG_HTTPLIB_INCLUDE_DIR "")
# No TLS, zlib or brotli support: the CPPHTTPLIB_*_SUPPORT switches stay undefined.
set(GPUDIAG_HTTPLIB_DEFINES CPPHTTPLIB_USE_POLL)
if(NOT GPUDIAG_HTTP STREQUAL "OFF")
  set(_why "")
  if(GPUDIAG_HTTPLIB_DIR)
    set(_dir "${GPUDIAG_HTTPLIB_DIR}")
  else()
    gpudiag_fetch_httplib(_ok _why)
    if(_ok)
      gpudiag_unpack_httplib("${CMAKE_BINARY_DIR}/_deps/cpp-httplib-${_gpudiag_httplib_version}"
                             _dir _why)
    endif()
  endif()
  if(NOT _why AND NOT EXISTS "${_dir}/httplib.h")
    set(_why "no httplib.h in ${_dir}")
  endif()
  if(NOT _why)
    file(STRINGS "${_dir}/httplib.h" _line REGEX "#define CPPHTTPLIB_VERSION \"")
    if(NOT _line MATCHES "\"0\\.18\\.")
      set(_why "${_dir}/httplib.h is not cpp-httplib 0.18 (${_line})")
    endif()
  endif()
  if(NOT _why)
    set(GPUDIAG_HAVE_HTTP ON)
    set(GPUDIAG_HTTPLIB_INCLUDE_DIR "${_dir}")
    message(STATUS "gpudiag dependency: cpp-httplib=${_dir} (header-only, no TLS)")
  elseif(GPUDIAG_HTTP STREQUAL "ON")
    message(FATAL_ERROR "gpudiag: cpp-httplib for the HTTP control (GPUDIAG_HTTP=ON): ${_why}")
  else()
    message(WARNING "gpudiag: sessions will have no HTTP control: ${_why}")
  endif()
endif()

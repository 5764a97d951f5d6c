# SPDX-License-Identifier: Apache-2.0
# GPUDIAG_SANITIZE="address;undefined" or "thread" instruments every target of the build.
if(GPUDIAG_SANITIZE)
  list(JOIN GPUDIAG_SANITIZE "," _gpudiag_sanitizers)
  add_compile_options(-fsanitize=${_gpudiag_sanitizers} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_gpudiag_sanitizers})
  message(STATUS "gpudiag: sanitizers ${_gpudiag_sanitizers}")
endif()

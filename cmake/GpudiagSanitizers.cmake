# SPDX-License-Identifier: Apache-2.0
# GPUDIAG_SANITIZE="address;undefined" or "thread" instruments every target of the build.
if(GPUDIAG_SANITIZE)
  list(JOIN GPUDIAG_SANITIZE "," _gpudiag_sanitizers)
  add_compile_options(-fsanitize=${_gpudiag_sanitizers} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_gpudiag_sanitizers})
  # clang's UBSan checks that a function is called through its own type. Every dlsym'ed CUDA,
  # CUPTI and NVML entry point (and NVTX's injection hook, in NVIDIA's header) is called through
  # the project's declaration of it, which names its opaque handles differently: by design, not
  # a bug to report.
  if("undefined" IN_LIST GPUDIAG_SANITIZE AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    add_compile_options(-fno-sanitize=function)
  endif()
  message(STATUS "gpudiag: sanitizers ${_gpudiag_sanitizers}")
endif()

# SPDX-License-Identifier: Apache-2.0
# gpudiag_target_warnings(<target>): the project's warning set, -Werror with GPUDIAG_WERROR.
function(gpudiag_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                           -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual)
    if(GPUDIAG_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

# SPDX-License-Identifier: Apache-2.0
# Real traces through the live path without a GPU (cupti_replay.hpp). Included by
# tests/cpp/capture/CMakeLists.txt (live_replay_test) and bench/CMakeLists.txt (live_replay):
# whichever comes first defines the targets.
#   gpudiag_replay_cupti  the replay libcupti: tests/cpp/capture's stub libcupti with its parser
#                         renamed, and replay_parser.cpp's cuptiActivityGetNextRecord, the real
#                         libcupti 13's where it loads. Its file name holds no "libcupti.so", so
#                         gpudiag never takes it for a CUPTI another client mapped.
#   gpudiag_live_replay   the replay itself (static), over gpudiag_static.
include_guard(GLOBAL)

set(_replay_dir ${CMAKE_CURRENT_LIST_DIR})
set(_stub_dir ${PROJECT_SOURCE_DIR}/tests/cpp/capture)
find_library(GPUDIAG_REPLAY_REAL_CUPTI NAMES libcupti.so.13
             HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/lib64)
if(NOT GPUDIAG_REPLAY_REAL_CUPTI)
  message(STATUS "gpudiag: no libcupti.so.13: the live replay walks records with the stub's parser")
  set(GPUDIAG_REPLAY_REAL_CUPTI "")
endif()

add_library(gpudiag_replay_cupti SHARED ${_stub_dir}/stub_cupti.cpp ${_replay_dir}/replay_parser.cpp)
target_include_directories(gpudiag_replay_cupti PRIVATE ${PROJECT_SOURCE_DIR}/libgpudiag/src)
target_include_directories(gpudiag_replay_cupti SYSTEM PRIVATE ${GPUDIAG_CUDA_INCLUDE_DIRS})
target_compile_definitions(gpudiag_replay_cupti PRIVATE
  GPUDIAG_HAVE_CUDA_HEADERS=1
  cuptiActivityGetNextRecord=gpudiag_stub_own_next_record
  GPUDIAG_REPLAY_REAL_CUPTI="${GPUDIAG_REPLAY_REAL_CUPTI}")
target_link_libraries(gpudiag_replay_cupti PRIVATE ${CMAKE_DL_LIBS})

# The stub libcuda and libnvidia-ml, as the capture tests build them, when the tests are off.
foreach(stub cuda nvml)
  if(NOT TARGET gpudiag_stub_${stub})
    add_library(gpudiag_stub_${stub} SHARED ${_stub_dir}/stub_${stub}.cpp)
    target_include_directories(gpudiag_stub_${stub} SYSTEM PRIVATE ${GPUDIAG_CUDA_INCLUDE_DIRS})
  endif()
endforeach()

add_library(gpudiag_live_replay STATIC ${_replay_dir}/cupti_replay.cpp)
target_include_directories(gpudiag_live_replay PUBLIC ${_replay_dir}
                           PRIVATE ${PROJECT_SOURCE_DIR}/libgpudiag/src)
target_include_directories(gpudiag_live_replay SYSTEM PRIVATE ${GPUDIAG_CUDA_INCLUDE_DIRS})
target_compile_definitions(gpudiag_live_replay PRIVATE GPUDIAG_HAVE_CUDA_HEADERS=1)
target_link_libraries(gpudiag_live_replay PUBLIC gpudiag_static PRIVATE ${CMAKE_DL_LIBS})
gpudiag_target_warnings(gpudiag_live_replay)
add_dependencies(gpudiag_live_replay gpudiag_replay_cupti gpudiag_stub_cuda gpudiag_stub_nvml)
# A program that replays: linked to the replay, told where its libraries are
# (select_replay_libraries). The libraries are never linked: gpudiag loads them as it would
# load CUPTI, and the replay reaches the stub's hooks through the same handle.
function(gpudiag_live_replay_program target)
  target_link_libraries(${target} PRIVATE gpudiag_live_replay)
  target_compile_definitions(${target} PRIVATE
    GPUDIAG_REPLAY_CUPTI="$<TARGET_FILE:gpudiag_replay_cupti>"
    GPUDIAG_REPLAY_CUDA="$<TARGET_FILE:gpudiag_stub_cuda>"
    GPUDIAG_REPLAY_NVML="$<TARGET_FILE:gpudiag_stub_nvml>"
    GPUDIAG_REPLAY_REAL_CUPTI="${GPUDIAG_REPLAY_REAL_CUPTI}")
endfunction()

# SPDX-License-Identifier: Apache-2.0
# Regenerates the demo recording and compares it with the committed one.
execute_process(COMMAND ${GENERATOR} ${SCRATCH} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_demo_recording failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${SCRATCH} ${COMMITTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${COMMITTED} differs from what tools/make_demo/make_demo_recording writes: "
                      "regenerate it with make_demo_recording ${COMMITTED}")
endif()

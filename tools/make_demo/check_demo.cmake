# SPDX-License-Identifier: Apache-2.0
# Regenerates a simulated recording and compares it with the committed one.
execute_process(COMMAND ${GENERATOR} ${SCRATCH} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GENERATOR} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${SCRATCH} ${COMMITTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${COMMITTED} differs from what its generator writes: "
                      "regenerate it with ${GENERATOR} ${COMMITTED}")
endif()

# SPDX-License-Identifier: Apache-2.0
# ctest -P script: runs the service with the planted leak (300 MiB in all: a leak must grow by
# 0.1 % of the device's capacity, 141 MiB on an H200) and passes when it exits 0 and its report
# calls the leak a leak, at its rate per request, naming its site as the holder of the growth.
execute_process(COMMAND "${SERVICE}" --requests 100 --leak-kib 3072
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "inference_service exited with ${rc}\n${out}\n${err}")
endif()
set(_leak "memory_leak: [^\n]* grows by 3\\.0 MiB per step[^\n]*\n[^\n]*")
string(APPEND _leak "service::RequestCache::remember[^\n]* holds (100|9[0-9]) % of the growth")
if(NOT out MATCHES "${_leak}")
  message(FATAL_ERROR "the report does not name the planted leak (3.0 MiB per step, "
                      "service::RequestCache::remember):\n${out}\n${err}")
endif()
message(STATUS "the report names the planted leak:\n${CMAKE_MATCH_0}")

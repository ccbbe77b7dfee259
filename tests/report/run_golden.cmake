# Runs the memguard CLI on a checked-in report and compares its stdout, stderr and exit status with
# the golden files <NAME>.expected and <NAME>.stderr.expected (absent: stderr must be empty).
#   cmake -DCLI=<memguard> -DDIR=<golden dir> -DNAME=<case> -DRC=<exit status> -DARGS=<a|b|c> -P run_golden.cmake
# With MEMGUARD_UPDATE_GOLDEN=1 in the environment it rewrites the golden files instead: review the diff.
# With -DPIPE=<golden_pipe.py> -DPYTHON=<python3> each report named is a FIFO of the same name.
# With -DRUN_DIR=<dir> it runs in that directory (the binary twin of the reports) and compares
# with DIR's golden files, a message's place in a report (":<line>:" or ": record at byte <n>:")
# aside; it never rewrites them.
string(REPLACE "|" ";" args "${ARGS}")
if(NOT DEFINED RUN_DIR)
  set(RUN_DIR ${DIR})
endif()
# With -DPIPE the reports named come as FIFOs (read once, as pipes).
set(runner "")
if(DEFINED PIPE)
  set(runner ${PYTHON} ${PIPE} ${RUN_DIR})
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=MEMGUARD_ADDR2LINE LC_ALL=C ${runner} ${CLI} ${args}
  WORKING_DIRECTORY ${RUN_DIR}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
set(out_file ${DIR}/${NAME}.expected)
set(err_file ${DIR}/${NAME}.stderr.expected)

if("$ENV{MEMGUARD_UPDATE_GOLDEN}" STREQUAL "1" AND RUN_DIR STREQUAL DIR AND NOT DEFINED PIPE)
  file(WRITE ${out_file} "${out}")
  if(err STREQUAL "")
    file(REMOVE ${err_file})
  else()
    file(WRITE ${err_file} "${err}")
  endif()
  message(STATUS "updated ${NAME} (exit status ${rc})")
endif()

set(expected_err "")
if(EXISTS ${err_file})
  file(READ ${err_file} expected_err)
endif()
file(READ ${out_file} expected_out)
if(NOT RUN_DIR STREQUAL DIR)
  foreach(v out err expected_out expected_err)
    string(REGEX REPLACE "\\.mgr(:[0-9]+|: record at byte [0-9]+):" ".mgr:<at>:" ${v} "${${v}}")
  endforeach()
endif()

set(failures "")
if(NOT rc STREQUAL RC)
  string(APPEND failures "exit status: expected ${RC}, got ${rc}\n")
endif()
if(NOT out STREQUAL expected_out)
  string(APPEND failures "stdout differs from ${out_file}\n--- expected\n${expected_out}--- actual\n${out}---\n")
endif()
if(NOT err STREQUAL expected_err)
  string(APPEND failures "stderr differs from ${err_file}\n--- expected\n${expected_err}--- actual\n${err}---\n")
endif()
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "golden case ${NAME}: memguard ${args}\n${failures}")
endif()

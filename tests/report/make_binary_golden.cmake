# Makes the binary twin of the golden reports: every golden/*.mgr in the binary encoding
# (memguard export --binary) in OUT, for the report.golden_binary.* runs. A report that does not
# convert whole (a malformed or cut one: what it tests is its text) is copied as it is.
#   cmake -DCLI=<memguard> -DSRC=<golden dir> -DOUT=<dir> -P make_binary_golden.cmake
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
file(GLOB reports RELATIVE ${SRC} ${SRC}/*.mgr)
set(converted 0)
set(copied "")
foreach(r ${reports})
  # A folded bounded report (report/fold.h) reads through its fold, which export does not carry:
  # it runs as it is, with its fold and parts.
  file(GLOB side RELATIVE ${SRC} ${SRC}/${r}.fold-*)
  if(side)
    file(GLOB parts ${SRC}/${r}.fold-* ${SRC}/${r}.part-*)
    file(COPY ${SRC}/${r} ${parts} DESTINATION ${OUT})
    list(APPEND copied ${r})
    continue()
  endif()
  execute_process(COMMAND ${CLI} export --binary ${SRC}/${r} -o ${OUT}/${r}
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(rc EQUAL 0 AND err STREQUAL "")
    math(EXPR converted "${converted} + 1")
  else()
    file(REMOVE ${OUT}/${r})
    file(COPY ${SRC}/${r} DESTINATION ${OUT})
    list(APPEND copied ${r})
  endif()
endforeach()
message(STATUS "binary golden reports: ${converted} converted; kept as text: ${copied}")
if(converted LESS 30)
  message(FATAL_ERROR "only ${converted} golden reports converted to binary")
endif()

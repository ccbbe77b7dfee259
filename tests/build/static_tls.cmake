# build.NoStaticTlsOfOtherLibraries: libmemguard.so binds static TLS (the initial-exec model its
# targets compile with) only for its own thread-locals, never another library's. A relocation such
# as R_X86_64_TPOFF64 against libstdc++'s std::__once_callable (what std::call_once compiled with
# -ftls-model=initial-exec leaves) makes every late dlopen of the library (allocator mode by hand:
# CUDAPluggableAllocator) fail with "libstdc++.so.6: cannot allocate memory in static TLS block" in
# a process that loaded libstdc++ with dlopen (a Python whose torch brought it). Found on the H200
# with the wheel built here by GCC 12, 2026-12-03.
#
#   cmake -DREADELF=readelf -DLIB=libmemguard.so -P static_tls.cmake
execute_process(COMMAND ${READELF} -rW ${LIB} OUTPUT_VARIABLE relocations RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "static_tls: ${READELF} -rW ${LIB} failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]*_TPOFF(64|32)[^\n]*" tls "${relocations}")
list(LENGTH tls count)
set(foreign "")
foreach(line IN LISTS tls)
  # Its own thread-locals: "R_X86_64_TPOFF64   <addend>"; another library's: "... <value> <symbol> + <addend>".
  if(line MATCHES "_TPOFF(64|32)[ \t]+[0-9a-f]+[ \t]+([^ \t]+)")
    list(APPEND foreign "${CMAKE_MATCH_2}")
  endif()
endforeach()
if(foreign)
  list(REMOVE_DUPLICATES foreign)
  message(FATAL_ERROR "static_tls: ${LIB} binds other libraries' thread-locals statically (initial-exec): "
                      "${foreign}; a late dlopen of it fails. Keep such code (std::call_once, ...) out of "
                      "the library or out of the initial-exec targets.")
endif()
if(count EQUAL 0)
  message(FATAL_ERROR "static_tls: no TPOFF relocation at all in ${LIB}: the check reads nothing")
endif()
message(STATUS "static_tls: ${count} static TLS relocations, all of the library's own thread-locals")

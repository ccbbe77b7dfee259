# build.SpdlogOnlyInLogCpp: spdlog is header-only here (the preload library needs no libspdlog.so),
# so every file that includes it compiles its implementation again: about 17 s of -O2 -g each,
# which once made most of a build and CI's time. src/common/log.cpp alone includes it; the rest log
# through common/log.h (fmt only).
#
#   cmake -DROOT=<source dir> -P spdlog_confined.cmake
file(GLOB_RECURSE files RELATIVE ${ROOT}
     ${ROOT}/src/*.h ${ROOT}/src/*.cpp ${ROOT}/include/*.h ${ROOT}/tools/*.h ${ROOT}/tools/*.cpp)
set(offenders "")
foreach(f IN LISTS files)
  if(f STREQUAL "src/common/log.cpp")
    continue()
  endif()
  file(STRINGS ${ROOT}/${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]spdlog/")
  if(lines)
    string(APPEND offenders "\n  ${f}")
  endif()
endforeach()
list(LENGTH files n)
if(n LESS 50)
  message(FATAL_ERROR "spdlog_confined: only ${n} source files under ${ROOT}: wrong ROOT?")
endif()
if(offenders)
  message(FATAL_ERROR "spdlog is included outside src/common/log.cpp (log through common/log.h):${offenders}")
endif()
message(STATUS "spdlog_confined: ${n} files, spdlog only in src/common/log.cpp")

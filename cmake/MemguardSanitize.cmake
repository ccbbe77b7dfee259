# Sanitizer and fuzzing builds (docs/security.md, "Kept in CI"). Both instrument every target of the build tree,
# so they go in a build directory of their own; the plain build is unaffected.
#
#   -DMEMGUARD_SANITIZE=address,undefined   ASan + UBSan; a UBSan finding aborts (the test fails)
#   -DMEMGUARD_SANITIZE=thread              TSan
#   -DMEMGUARD_FUZZ=ON                      the libFuzzer harnesses of tests/fuzz (clang only), with
#                                           ASan + UBSan and libFuzzer's coverage in all code
#
# Which tests such a build runs is .ci/run's choice: a sanitized libmemguard.so needs its sanitizer's
# runtime loaded first in every child it is preloaded into, so the sanitizer jobs run the in-process
# tests (unit, report and CLI, allocator) and not the preload tests.

set(MEMGUARD_SANITIZE "" CACHE STRING "Sanitizers for all code and tests (-fsanitize=...): address,undefined or thread; empty for none")
option(MEMGUARD_FUZZ "Build the libFuzzer harnesses in tests/fuzz (needs clang; instruments all code with ASan and UBSan)" OFF)

if(MEMGUARD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "memguard: MEMGUARD_FUZZ needs clang (libFuzzer): configure a build directory of its own "
      "with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  if(MEMGUARD_SANITIZE)
    message(FATAL_ERROR "memguard: MEMGUARD_FUZZ brings its own sanitizers (address,undefined); leave MEMGUARD_SANITIZE empty")
  endif()
  # fuzzer-no-link: coverage instrumentation everywhere; only the harnesses link libFuzzer's main.
  set(_mg_sanitize_flags -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  add_compile_options(${_mg_sanitize_flags})
  add_link_options(-fsanitize=address,undefined)
  set(MEMGUARD_SANITIZERS "address;undefined")
elseif(MEMGUARD_SANITIZE)
  string(REPLACE "," ";" MEMGUARD_SANITIZERS "${MEMGUARD_SANITIZE}")
  foreach(_mg_s IN LISTS MEMGUARD_SANITIZERS)
    if(NOT _mg_s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "memguard: MEMGUARD_SANITIZE takes address, undefined and thread (comma-separated), not '${_mg_s}'")
    endif()
  endforeach()
  if("thread" IN_LIST MEMGUARD_SANITIZERS AND "address" IN_LIST MEMGUARD_SANITIZERS)
    message(FATAL_ERROR "memguard: MEMGUARD_SANITIZE: thread and address cannot be combined (two build directories)")
  endif()
  set(_mg_sanitize_flags -fsanitize=${MEMGUARD_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST MEMGUARD_SANITIZERS)
    # A UBSan finding must fail the test, not print a line and go on.
    list(APPEND _mg_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options(${_mg_sanitize_flags})
  add_link_options(-fsanitize=${MEMGUARD_SANITIZE})
  message(STATUS "memguard: instrumenting with -fsanitize=${MEMGUARD_SANITIZE}")
else()
  set(MEMGUARD_SANITIZERS "")
endif()

# An instrumented build compiles at -O1 with line tables only (-g1), after the build type's flags:
# what ASan's and TSan's documentation advise (every frame of a report keeps its file:line), and
# under instrumentation less than half the compile time of -O2 -g (ASan+UBSan,
# tests/report/parser_test.cpp: 99 s against 41 s), which keeps CI's sanitizer and fuzz jobs within
# its time. MEMGUARD_SANITIZE_OPT sets other flags ("" keeps the build type's).
set(MEMGUARD_SANITIZE_OPT "-O1 -g1" CACHE STRING
    "Optimisation and debug flags of a sanitized or fuzzing build, after the build type's")
if(MEMGUARD_SANITIZERS AND MEMGUARD_SANITIZE_OPT)
  separate_arguments(_mg_sanitize_opt UNIX_COMMAND "${MEMGUARD_SANITIZE_OPT}")
  add_compile_options(${_mg_sanitize_opt})
endif()

# The shared runtime gcc links for a sanitizer ("asan", "tsan"): its absolute path, or "" when the
# compiler is not gcc or the runtime is not installed. Instrumented test hosts (tests/apps) use it.
function(memguard_sanitizer_runtime name out)
  set(_path "")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=lib${name}.so
      OUTPUT_VARIABLE _path OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT IS_ABSOLUTE "${_path}" OR NOT EXISTS "${_path}")
      set(_path "")
    endif()
  endif()
  set(${out} "${_path}" PARENT_SCOPE)
endfunction()

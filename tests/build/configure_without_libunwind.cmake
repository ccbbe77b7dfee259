# Configures the project with MEMGUARD_LIBUNWIND_PREFIX naming an empty directory and checks that
# the configure fails with the message that names the setup step (tools/setup.sh) and both
# alternatives, and that it put nothing into that prefix: configuring finds, it never builds or
# installs a dependency.
#
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DC_COMPILER=... -DCXX_COMPILER=...
#         -DCUDA_INCLUDE_DIR=... -DNVTX_INCLUDE_DIR=... -P configure_without_libunwind.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
file(MAKE_DIRECTORY "${prefix}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
          -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
          -DMEMGUARD_CUDA_INCLUDE_DIR=${CUDA_INCLUDE_DIR} -DMEMGUARD_NVTX_INCLUDE_DIR=${NVTX_INCLUDE_DIR}
          -DMEMGUARD_UNWINDER=libunwind -DMEMGUARD_LIBUNWIND_PREFIX=${prefix}
          -DMEMGUARD_BUILD_TESTS=OFF -DMEMGUARD_BUILD_BENCH=OFF
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the configure succeeded without a libunwind in ${prefix}")
endif()
# CMake wraps a message's lines; compare with the white space squeezed.
string(REGEX REPLACE "[ \t\r\n]+" " " text "${err}")
foreach(expected
    "memguard: no PIC static libunwind at MEMGUARD_LIBUNWIND_PREFIX=${prefix}"
    "tools/setup.sh builds it into .deps/libunwind"
    "-DMEMGUARD_LIBUNWIND_PREFIX=<prefix of a -fPIC static libunwind>"
    "-DMEMGUARD_UNWINDER=libgcc")
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the configure's error does not say: ${expected}")
  endif()
endforeach()
file(GLOB_RECURSE left "${prefix}/*")
if(left)
  message(FATAL_ERROR "the configure wrote into the libunwind prefix: ${left}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")

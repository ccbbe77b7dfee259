# Third-party dependencies. None of them may become a NEEDED entry of libmemguard.so:
# spdlog and fmt are used header-only, libunwind is linked as a PIC static archive, and the
# CUDA toolkit contributes headers only. zlib serves the CLI alone.

find_package(Threads REQUIRED)

# The python3 that looks for the nvidia wheels' headers (tools/setup.sh installs them there). Under
# pip's isolated wheel build PYTHONPATH names a sitecustomize that hides the site-packages holding
# them, so that lookup runs without it.
set(_mg_python3 python3)
if(SKBUILD)
  set(_mg_python3 ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE python3)
endif()

# --- CUDA headers (never linked) ---------------------------------------------------------------
set(MEMGUARD_CUDA_INCLUDE_DIR "" CACHE PATH "Directory holding cuda_runtime_api.h")
if(NOT MEMGUARD_CUDA_INCLUDE_DIR)
  find_path(_mg_cuda_inc cuda_runtime_api.h
    HINTS $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include /usr/local/cuda/include /usr/include
    NO_CACHE)
  if(_mg_cuda_inc)
    set(MEMGUARD_CUDA_INCLUDE_DIR "${_mg_cuda_inc}")
  endif()
endif()
if(NOT MEMGUARD_CUDA_INCLUDE_DIR)
  # The nvidia-cuda-runtime wheel from PyPI ships the headers (nvidia/cu13/include; older wheels
  # nvidia/cuda_runtime/include).
  execute_process(COMMAND ${_mg_python3} -c "import glob, os, sys\nfor p in sys.path:\n    for c in sorted(glob.glob(os.path.join(p, 'nvidia', '*', 'include', 'cuda_runtime_api.h'))):\n        print(os.path.dirname(c)); sys.exit(0)"
    OUTPUT_VARIABLE _mg_pyinc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_mg_pyinc AND EXISTS "${_mg_pyinc}/cuda_runtime_api.h")
    set(MEMGUARD_CUDA_INCLUDE_DIR "${_mg_pyinc}")
  endif()
endif()
if(NOT MEMGUARD_CUDA_INCLUDE_DIR OR NOT EXISTS "${MEMGUARD_CUDA_INCLUDE_DIR}/cuda_runtime_api.h")
  message(FATAL_ERROR "memguard: CUDA headers not found. Install the CUDA toolkit, or `pip install nvidia-cuda-runtime`, or pass -DMEMGUARD_CUDA_INCLUDE_DIR=<dir with cuda_runtime_api.h>.")
endif()
message(STATUS "memguard: CUDA headers in ${MEMGUARD_CUDA_INCLUDE_DIR}")
add_library(memguard_cuda_headers INTERFACE)
target_include_directories(memguard_cuda_headers SYSTEM INTERFACE ${MEMGUARD_CUDA_INCLUDE_DIR})

# --- NVTX v3 headers (header-only; memguard is an NVTX injection library) -------------------------
# The CUDA toolkit ships include/nvtx3; the nvidia-cuda-runtime wheel does not, the nvidia-nvtx wheel
# does (nvidia/cu13/include/nvtx3).
set(MEMGUARD_NVTX_INCLUDE_DIR "" CACHE PATH "Directory holding nvtx3/nvToolsExt.h")
if(NOT MEMGUARD_NVTX_INCLUDE_DIR AND EXISTS "${MEMGUARD_CUDA_INCLUDE_DIR}/nvtx3/nvToolsExt.h")
  set(MEMGUARD_NVTX_INCLUDE_DIR "${MEMGUARD_CUDA_INCLUDE_DIR}")
endif()
if(NOT MEMGUARD_NVTX_INCLUDE_DIR)
  find_path(_mg_nvtx_inc nvtx3/nvToolsExt.h
    HINTS $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include /usr/local/cuda/include /usr/include
    NO_CACHE)
  if(_mg_nvtx_inc)
    set(MEMGUARD_NVTX_INCLUDE_DIR "${_mg_nvtx_inc}")
  endif()
endif()
if(NOT MEMGUARD_NVTX_INCLUDE_DIR)
  execute_process(COMMAND ${_mg_python3} -c "import glob, os, sys\nfor p in sys.path:\n    for c in sorted(glob.glob(os.path.join(p, 'nvidia', '*', 'include', 'nvtx3', 'nvToolsExt.h'))):\n        print(os.path.dirname(os.path.dirname(c))); sys.exit(0)"
    OUTPUT_VARIABLE _mg_pynvtx OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_mg_pynvtx AND EXISTS "${_mg_pynvtx}/nvtx3/nvToolsExt.h")
    set(MEMGUARD_NVTX_INCLUDE_DIR "${_mg_pynvtx}")
  endif()
endif()
if(NOT MEMGUARD_NVTX_INCLUDE_DIR OR NOT EXISTS "${MEMGUARD_NVTX_INCLUDE_DIR}/nvtx3/nvToolsExt.h")
  message(FATAL_ERROR "memguard: NVTX v3 headers (nvtx3/nvToolsExt.h) not found. Install the CUDA toolkit, or `pip install nvidia-nvtx`, or pass -DMEMGUARD_NVTX_INCLUDE_DIR=<dir holding nvtx3/>.")
endif()
message(STATUS "memguard: NVTX headers in ${MEMGUARD_NVTX_INCLUDE_DIR}")
add_library(memguard_nvtx_headers INTERFACE)
target_include_directories(memguard_nvtx_headers SYSTEM INTERFACE ${MEMGUARD_NVTX_INCLUDE_DIR})

# --- zlib: the CLI's gzip folds (report/fold.cpp), never the library's ----------------------------
# A wheel links the static archive, so that the CLI it ships needs only glibc, libstdc++ and
# libgcc_s (tests/wheel/check_wheel.py); other builds take the shared library.
if(MEMGUARD_WHEEL)
  set(ZLIB_USE_STATIC_LIBS ON)
endif()
find_package(ZLIB)
if(NOT ZLIB_FOUND)
  message(FATAL_ERROR "memguard: zlib not found (the CLI writes a bounded report's folds as gzip). Install zlib1g-dev (tools/setup.sh does), or pass -DZLIB_ROOT=<prefix holding include/zlib.h and lib/libz.*>.")
endif()

# --- fmt and spdlog, header-only ---------------------------------------------------------------
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
add_library(memguard_logging_deps INTERFACE)
if(TARGET spdlog::spdlog_header_only)
  target_link_libraries(memguard_logging_deps INTERFACE spdlog::spdlog_header_only)
else()
  get_target_property(_mg_spdlog_inc spdlog::spdlog INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(memguard_logging_deps SYSTEM INTERFACE ${_mg_spdlog_inc})
  target_compile_definitions(memguard_logging_deps INTERFACE SPDLOG_HEADER_ONLY)
endif()
if(TARGET fmt::fmt-header-only)
  target_link_libraries(memguard_logging_deps INTERFACE fmt::fmt-header-only)
else()
  get_target_property(_mg_fmt_inc fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(memguard_logging_deps SYSTEM INTERFACE ${_mg_fmt_inc})
  target_compile_definitions(memguard_logging_deps INTERFACE FMT_HEADER_ONLY)
endif()
# Debian builds spdlog against the external fmt.
target_compile_definitions(memguard_logging_deps INTERFACE SPDLOG_FMT_EXTERNAL SPDLOG_NO_EXCEPTIONS)

# --- libunwind: a PIC static archive, found here, built beforehand (docs/unwinding.md) ----------
# Configuring only looks for it: `tools/setup.sh` builds it into .deps/libunwind (through
# tools/build-libunwind.sh) as an explicit step, so that a configure never fetches, builds or
# installs anything.
add_library(memguard_unwinder INTERFACE)
if(MEMGUARD_UNWINDER STREQUAL "libunwind")
  set(MEMGUARD_LIBUNWIND_PREFIX "${PROJECT_SOURCE_DIR}/.deps/libunwind" CACHE PATH
      "Prefix of a position-independent static libunwind (tools/setup.sh builds one into .deps/libunwind)")
  if(NOT EXISTS "${MEMGUARD_LIBUNWIND_PREFIX}/lib/libunwind.a" OR
     NOT EXISTS "${MEMGUARD_LIBUNWIND_PREFIX}/include/libunwind.h")
    message(FATAL_ERROR "memguard: no PIC static libunwind at MEMGUARD_LIBUNWIND_PREFIX="
      "${MEMGUARD_LIBUNWIND_PREFIX} (lib/libunwind.a and include/libunwind.h). Build it first: "
      "tools/setup.sh builds it into .deps/libunwind, the default prefix (tools/build-libunwind.sh PREFIX "
      "alone builds it anywhere); or pass -DMEMGUARD_LIBUNWIND_PREFIX=<prefix of a -fPIC static libunwind>; "
      "or -DMEMGUARD_UNWINDER=libgcc (no libunwind, about 20x slower stacks).")
  endif()
  target_include_directories(memguard_unwinder SYSTEM INTERFACE ${MEMGUARD_LIBUNWIND_PREFIX}/include)
  target_link_libraries(memguard_unwinder INTERFACE
    ${MEMGUARD_LIBUNWIND_PREFIX}/lib/libunwind.a)
  target_compile_definitions(memguard_unwinder INTERFACE MEMGUARD_USE_LIBUNWIND=1 UNW_LOCAL_ONLY)
elseif(MEMGUARD_UNWINDER STREQUAL "libgcc")
  target_compile_definitions(memguard_unwinder INTERFACE MEMGUARD_USE_LIBUNWIND=0)
else()
  message(FATAL_ERROR "memguard: MEMGUARD_UNWINDER must be libunwind or libgcc")
endif()

# --- GoogleTest ----------------------------------------------------------------------------------
if(MEMGUARD_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

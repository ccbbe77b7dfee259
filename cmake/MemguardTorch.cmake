# memguard_find_torch(<var>): the torch package directory of the tests' Python (MEMGUARD_TEST_PYTHON
# when set, else the Python 3 CMake finds) when it has torch's C++ headers and lib/libc10.so, else
# an empty string. Tests that throw or catch PyTorch's C++ types build only when it is found.
function(memguard_find_torch out)
  set(python "${MEMGUARD_TEST_PYTHON}")
  if(NOT python)
    find_package(Python3 COMPONENTS Interpreter)
    set(python "${Python3_EXECUTABLE}")
  endif()
  set(dir "")
  if(python)
    # find_spec, not import: importing torch at configure time takes seconds.
    execute_process(
      COMMAND ${python} -c "import importlib.util, os\ns = importlib.util.find_spec('torch')\nprint(os.path.dirname(s.origin) if s and s.origin else '')"
      OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(NOT dir OR NOT EXISTS "${dir}/include/c10/util/Exception.h" OR NOT EXISTS "${dir}/lib/libc10.so")
    set(dir "")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# The wheel build (MEMGUARD_WHEEL, on when scikit-build-core runs CMake: pyproject.toml). It is the
# only build that installs; scikit-build-core installs into the wheel's platlib, so the layout is
#
#   memguard/_native/lib/libmemguard.so   the preload library
#   memguard/_native/bin/memguard         the CLI; it finds the library at <its dir>/../lib, as in
#                                         the build tree (build/bin, build/lib)
#
# next to the Python package (python/memguard, copied by scikit-build-core itself).

# A second `pip wheel .` reuses the persistent build-wheel/ directory; ccache, when present, also
# serves the objects a normal build already compiled.
if(NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(MEMGUARD_CCACHE ccache)
  if(MEMGUARD_CCACHE)
    set(CMAKE_C_COMPILER_LAUNCHER ${MEMGUARD_CCACHE})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${MEMGUARD_CCACHE})
  endif()
endif()

# Called after the targets exist (the top CMakeLists.txt).
function(memguard_wheel_install)
  # No RPATH: neither file needs a library built here (libunwind is a static archive inside the .so).
  set_target_properties(memguard memguard_cli PROPERTIES INSTALL_RPATH "")
  install(TARGETS memguard LIBRARY DESTINATION memguard/_native/lib)
  install(TARGETS memguard_cli RUNTIME DESTINATION memguard/_native/bin)
  # The debug info goes (52 MB -> 1.3 MB for the library), the symbol tables stay: memguard's own
  # frames keep their names in a report's stacks and in a debugger.
  if(CMAKE_STRIP)
    install(CODE "
      foreach(f memguard/_native/lib/libmemguard.so memguard/_native/bin/memguard)
        execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${f}\"
                        RESULT_VARIABLE rc)
        if(NOT rc EQUAL 0)
          message(FATAL_ERROR \"memguard: ${CMAKE_STRIP} --strip-debug \${f} failed\")
        endif()
      endforeach()")
  else()
    message(WARNING "memguard: no strip program; the wheel keeps its debug info (about 75 MB)")
  endif()
endfunction()

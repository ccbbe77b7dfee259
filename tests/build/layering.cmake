# build.Layering: which folders of src/ each module target can include, compared with the layering
# the project documents (docs/architecture.md, "Modules and dependencies"). For every module target
# and every folder of src/, one header of the folder is preprocessed with the target's own include
# directories and definitions (as the build compiles the target's files): it must be found exactly
# when the layering lets that target use the folder. A new target_link_libraries line that lets a
# lower room reach a higher one makes a folder visible that should not be, and fails here; so does a
# room that can no longer see what it is documented to use.
#
#   cmake -DSRC_DIR=<src> -DCXX=<compiler> -DTARGETS=<generated file> -P layering.cmake
# TARGETS sets, per target T, T_INCLUDES and T_DEFINES (from the build) and the list MODULES.

# The documented layering: what each module target may see (its own folder included).
set(allowed_memguard_format format)
set(allowed_memguard_common common format)
set(allowed_memguard_alloc alloc common format)
set(allowed_memguard_track track format common)
set(allowed_memguard_python_rules python)
set(allowed_memguard_python python track format common)
set(allowed_memguard_cuda cuda track format common)
set(allowed_memguard_allocmode allocmode alloc cuda python track format common)
set(allowed_memguard_runtime runtime allocmode alloc cuda python track format common)
set(allowed_memguard_allocmode_api runtime allocmode alloc cuda python track format common)
set(allowed_memguard interpose runtime allocmode alloc cuda python track format common)
set(allowed_memguard_report report format common)
set(allowed_memguard_cli report format common)

include(${TARGETS})
file(GLOB folders RELATIVE ${SRC_DIR} ${SRC_DIR}/*)
set(failures "")
foreach(target IN LISTS MODULES)
  if(NOT DEFINED allowed_${target})
    string(APPEND failures "\n  ${target}: not in the documented layering (add it to tests/build/layering.cmake)")
    continue()
  endif()
  set(flags "")
  foreach(dir IN LISTS ${target}_INCLUDES)
    list(APPEND flags "-I${dir}")
  endforeach()
  foreach(def IN LISTS ${target}_DEFINES)
    # Empty where a dependency's generator expression gave nothing (nlohmann_json's).
    if(NOT def STREQUAL "")
      list(APPEND flags "-D${def}")
    endif()
  endforeach()
  foreach(folder IN LISTS folders)
    if(NOT IS_DIRECTORY ${SRC_DIR}/${folder})
      continue()
    endif()
    file(GLOB headers RELATIVE ${SRC_DIR} ${SRC_DIR}/${folder}/*.h)
    list(SORT headers)
    if(NOT headers)
      continue()
    endif()
    list(GET headers 0 header)
    file(WRITE ${WORK_DIR}/probe_${target}_${folder}.cpp "#include \"${header}\"\n")
    execute_process(COMMAND ${CXX} -std=c++17 -E ${flags} ${WORK_DIR}/probe_${target}_${folder}.cpp
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    list(FIND allowed_${target} ${folder} index)
    if(index GREATER -1 AND NOT rc EQUAL 0)
      string(APPEND failures "\n  ${target} should see ${folder}/, but ${header} does not preprocess:\n${err}")
    elseif(index EQUAL -1 AND rc EQUAL 0)
      string(APPEND failures "\n  ${target} sees ${folder}/ (${header}), which the layering does not allow")
    elseif(index EQUAL -1 AND NOT err MATCHES "${header}")
      string(APPEND failures "\n  ${target}: ${header} failed, but not for want of the file:\n${err}")
    endif()
  endforeach()
  message(STATUS "${target}: sees ${allowed_${target}}")
endforeach()
if(failures)
  message(FATAL_ERROR "the build's layering differs from the documented one:${failures}")
endif()

# The layering of src/, kept by the compiler: a module target exposes only its own folder. Each
# target's include root is a directory of the build tree holding one link, <folder> -> src/<folder>,
# so `#include "track/recorder.h"` resolves in a file whose target links memguard_track (directly or
# through the modules it links) and fails everywhere else: report/ cannot include track/, track/
# cannot include runtime/. Adding an upward dependency takes a target_link_libraries line, which
# tests/build's build.Layering compares with the documented layering (docs/architecture.md).

# memguard_module(TARGET FOLDER [INTERFACE]): TARGET's headers are src/FOLDER's.
function(memguard_module target folder)
  set(root ${CMAKE_BINARY_DIR}/module-include/${target})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
  if(ARGV2 STREQUAL "INTERFACE")
    target_include_directories(${target} INTERFACE ${root})
  else()
    target_include_directories(${target} PUBLIC ${root})
  endif()
endfunction()

# The public C API (include/memguard/memguard.h), for the modules that implement or use it.
add_library(memguard_public_api INTERFACE)
target_include_directories(memguard_public_api INTERFACE ${PROJECT_SOURCE_DIR}/include)

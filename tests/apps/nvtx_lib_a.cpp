// libmg_nvtx_a.so: one NVTX copy, ASCII calls in the default domain (see nvtx_lib.h).
#include <nvtx3/nvToolsExt.h>

#include "nvtx_lib.h"

#define NVTX_LIB_FN extern "C" __attribute__((visibility("default")))

NVTX_LIB_FN int nvtx_a_push(const char* message) { return nvtxRangePushA(message); }
NVTX_LIB_FN int nvtx_a_pop() { return nvtxRangePop(); }
NVTX_LIB_FN uint64_t nvtx_a_start(const char* message) { return nvtxRangeStartA(message); }
NVTX_LIB_FN void nvtx_a_end(uint64_t id) { nvtxRangeEnd(id); }
NVTX_LIB_FN void nvtx_a_mark(const char* message) { nvtxMarkA(message); }

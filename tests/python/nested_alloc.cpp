// For test_native_cut.py: cudaMalloc reached through `depth` extra native frames, so that a
// Python caller's native stack has a chosen number of frames above the interpreter.
#include <cstddef>
#include <cuda_runtime_api.h>

namespace {
volatile int g_sink = 0;

__attribute__((noinline)) int nested(void** p, size_t size, int depth) {
    if (depth > 0) {
        int rc = nested(p, size, depth - 1);
        g_sink += 1;  // keeps the call from becoming a tail call
        return rc;
    }
    return static_cast<int>(cudaMalloc(p, size));
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int mgtest_nested_cuda_malloc(void** p, size_t size, int depth) {
    return nested(p, size, depth);
}

// Call chains for tests/unit/stack_memo_test.cpp, in a shared library of their own so that their
// frames are outside the test binary, which the native unwinder treats as memguard's own code
// (dropped from the top of every stack), as libmemguard.so is in a real process.
#include <cstdint>

extern "C" {

using Hook = uint32_t (*)(int mode);

volatile int g_chain_sink = 0;

// C calls the hook from one call site; A and B call C with frames of the same size, so C's return
// address into the hook lands in the same stack slot from either, while the frames above differ.
__attribute__((noinline, visibility("default"))) uint32_t memo_chain_c(Hook hook, int mode) {
    uint32_t id = hook(mode);
    g_chain_sink = g_chain_sink + 1;
    return id;
}

__attribute__((noinline, visibility("default"))) uint32_t memo_chain_a(Hook hook, int mode) {
    volatile char pad[48];
    pad[0] = 'a';
    uint32_t id = memo_chain_c(hook, mode);
    g_chain_sink = g_chain_sink + pad[0];
    return id;
}

__attribute__((noinline, visibility("default"))) uint32_t memo_chain_b(Hook hook, int mode) {
    volatile char pad[48];
    pad[0] = 'b';
    uint32_t id = memo_chain_c(hook, mode);
    g_chain_sink = g_chain_sink + pad[0] * 3;
    return id;
}

// Recursion `depth` deep, then A or B: stacks of many shapes.
__attribute__((noinline, visibility("default"))) uint32_t memo_chain_deep(Hook hook, int mode, int depth, int which) {
    if (depth <= 0) return which ? memo_chain_b(hook, mode) : memo_chain_a(hook, mode);
    uint32_t id = memo_chain_deep(hook, mode, depth - 1, which);
    g_chain_sink = g_chain_sink + depth;
    return id;
}

// A's, B's and C's code, for a native cut inside the chain.
__attribute__((visibility("default"))) void memo_chain_range(uintptr_t* lo, uintptr_t* hi) {
    uintptr_t fns[] = {reinterpret_cast<uintptr_t>(&memo_chain_a), reinterpret_cast<uintptr_t>(&memo_chain_b),
                       reinterpret_cast<uintptr_t>(&memo_chain_c)};
    *lo = fns[0];
    *hi = fns[0];
    for (uintptr_t f : fns) {
        if (f < *lo) *lo = f;
        if (f > *hi) *hi = f;
    }
    *hi += 256;  // past the last one's body
}
}

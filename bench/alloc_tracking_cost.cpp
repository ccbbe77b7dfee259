// Per-allocation cost of allocator-mode tracking (docs/benchmarks.md): memguard_alloc +
// memguard_free pairs, the way PyTorch's CUDAPluggableAllocator calls them, from a deep native
// call chain, against the fake CUDA runtime. Every pair after the first hits the allocator's
// cache, so what is left is memguard's bookkeeping: the unwind, the interning of the native (and,
// from Python, the Python) stack and the T/t records.
//
// Built twice from this file: the shared library build/lib/libmemguard_bench_tracking.so (for a Python
// caller, bench/alloc_tracking_cost.py, through ctypes) and the executable
// memguard_bench_alloc_tracking, which calls the same entry point:
//   LD_PRELOAD=build/lib/libmemguard.so MEMGUARD_ALLOCATOR=memguard \
//       build/bin/memguard_bench_alloc_tracking [iterations] [depth] [lines] [new_every]
// prints "tracking <depth> <ns per alloc+free>". With `new_every` N, every Nth pair comes from a
// stack the thread's StackMemo does not hold (a memo miss). With `lines`, each pair is followed by stores to
// that many cache lines of a 4 MiB area (other_work), whose own time is measured apart and
// subtracted: the pairs then run with colder caches, as between PyTorch's own work. bench/run_alloc_tracking_cost.sh runs the arms.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>

namespace {

using AllocFn = void* (*)(size_t, int, cudaStream_t);
using FreeFn = void (*)(void*, size_t, int, cudaStream_t);

AllocFn g_alloc = nullptr;
FreeFn g_free = nullptr;
volatile int g_sink = 0;

bool find_api() {
    if (g_alloc) return true;
    g_alloc = reinterpret_cast<AllocFn>(dlsym(RTLD_DEFAULT, "memguard_alloc"));
    g_free = reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "memguard_free"));
    if (!g_alloc || !g_free) {
        std::fprintf(stderr, "memguard_alloc/memguard_free not found: preload libmemguard.so\n");
        return false;
    }
    return true;
}

// Work between pairs, as PyTorch's dispatch does around each allocation: stores to `g_lines`
// cache lines of a 4 MiB area, in turn, so that the allocator's and the report buffer's lines
// are no longer in the nearest caches when the next pair comes (0: back-to-back pairs).
int g_lines = 0;
constexpr size_t kArea = 4 << 20;
unsigned char* g_area = nullptr;
size_t g_pos = 0;

inline void other_work() {
    for (int i = 0; i < g_lines; ++i) {
        g_area[g_pos] = static_cast<unsigned char>(g_area[g_pos] + 1);
        g_pos = (g_pos + 64) & (kArea - 1);
    }
}

// Every `g_new_every`-th pair (0: none) comes from a stack its thread's StackMemo does not hold:
// below 1024 different amounts of stack (an alloca above the kept frames), 70 frames deep, so
// the kept frames are the same and only their slots differ, more of them than the memo keeps.
int g_new_every = 0;
long g_new_count = 0;

__attribute__((noinline)) void deep_pair(int depth) {
    if (depth > 0) {
        deep_pair(depth - 1);
        g_sink += 1;
        return;
    }
    void* p = g_alloc(1 << 20, 0, nullptr);
    g_free(p, 1 << 20, 0, nullptr);
}

__attribute__((noinline)) void pair_from_new_stack() {
    const size_t pad = 16 * static_cast<size_t>(g_new_count++ % 1024 + 1);
    auto* area = static_cast<volatile char*>(__builtin_alloca(pad));
    area[0] = 0;
    deep_pair(70);
    g_sink += area[0];
}

double run_pairs(long iterations) {
    const size_t size = 1 << 20;
    if (g_lines > 0 && !g_area) {
        // Touched once here, so that no page fault falls in the timed loops.
        g_area = static_cast<unsigned char*>(std::malloc(kArea));
        if (g_area)
            std::memset(g_area, 0, kArea);
        else
            g_lines = 0;
    }
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) {
        if (g_new_every > 0 && i % g_new_every == 0) {
            pair_from_new_stack();
        } else {
            void* p = g_alloc(size, 0, nullptr);
            g_free(p, size, 0, nullptr);
        }
        other_work();
    }
    auto t1 = std::chrono::steady_clock::now();
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    if (g_lines > 0) {  // the work alone, subtracted
        auto w0 = std::chrono::steady_clock::now();
        for (long i = 0; i < iterations; ++i) other_work();
        ns -= std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - w0).count();
    }
    return ns / static_cast<double>(iterations);
}

// Recurses `depth` frames deep before measuring, so every native stack has about `depth` frames.
__attribute__((noinline)) double nested(int depth, long iterations) {
    if (depth > 0) {
        double r = nested(depth - 1, iterations);
        g_sink += 1;  // keeps the call from becoming a tail call
        return r;
    }
    return run_pairs(iterations);
}

}  // namespace

/// ns per memguard_alloc + memguard_free pair from `depth` extra native frames; < 0 on failure.
extern "C" __attribute__((visibility("default"))) double memguard_bench_tracking(long iterations, int depth) {
    if (!find_api()) return -1.0;
    // Also makes this object need the (fake) runtime, where memguard finds the real functions.
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        std::fprintf(stderr, "no CUDA device (fake runtime not loaded?)\n");
        return -1.0;
    }
    nested(depth, iterations / 10 + 1);  // warm-up: the cached block, the first-stack interning
    return nested(depth, iterations);
}

#ifdef MEMGUARD_BENCH_MAIN
int main(int argc, char** argv) {
    long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
    int depth = argc > 2 ? std::atoi(argv[2]) : 40;
    g_lines = argc > 3 ? std::atoi(argv[3]) : 0;
    g_new_every = argc > 4 ? std::atoi(argv[4]) : 0;
    double ns = memguard_bench_tracking(iterations, depth);
    if (ns < 0) return 1;
    std::printf("tracking %d %.1f\n", depth, ns);
    return 0;
}
#endif

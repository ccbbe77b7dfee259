// Cost of memguard on the hook path (docs/benchmarks.md).
//
// usage: memguard_bench_hook_cost alloc|unwind [iterations] [depth]
//   alloc:  cudaMalloc + cudaFree pairs (1 MiB) from `depth` nested frames; run it with and without
//           LD_PRELOAD=libmemguard.so to get the added cost (bench/run_hook_cost.sh does).
//   unwind: memguard's stack capture alone from the same depth.
// Prints one line: "<mode> <depth> <ns per operation>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>

#include "track/unwind.h"

namespace {

volatile int g_sink = 0;

double run_alloc(long iterations) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) {
            std::fprintf(stderr, "cudaMalloc/cudaFree failed\n");
            std::exit(1);
        }
    }
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iterations);
}

double run_unwind(long iterations) {
    uintptr_t ips[300];
    memguard::track::NativeUnwinder unwinder;
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) g_sink += unwinder.capture(ips, 64);
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iterations);
}

// Recurses `depth` frames deep before measuring, so every stack has about `depth` frames.
__attribute__((noinline)) double nested(int depth, bool alloc, long iterations) {
    if (depth > 0) {
        double r = nested(depth - 1, alloc, iterations);
        g_sink += 1;  // keeps the call from becoming a tail call
        return r;
    }
    return alloc ? run_alloc(iterations) : run_unwind(iterations);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || (std::strcmp(argv[1], "alloc") != 0 && std::strcmp(argv[1], "unwind") != 0)) {
        std::fprintf(stderr, "usage: %s alloc|unwind [iterations] [depth]\n", argv[0]);
        return 2;
    }
    bool alloc = std::strcmp(argv[1], "alloc") == 0;
    long iterations = argc > 2 ? std::atol(argv[2]) : 200000;
    int depth = argc > 3 ? std::atoi(argv[3]) : 58;
    nested(depth / 10, alloc, iterations / 10);  // warm-up: caches, page faults, first-stack interning
    double ns = nested(depth, alloc, iterations);
    std::printf("%s %d %.1f\n", argv[1], depth, ns);
    return 0;
}

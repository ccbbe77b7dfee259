// An allocation churn for the reader's benchmark (bench/report_scale.py, docs/benchmarks.md):
// cudaMalloc/cudaFree pairs over the fake runtime, from 8 allocation sites (distinct call stacks),
// with a ring of `live` blocks that each stay allocated for `live` pairs and 16 blocks that live to
// the end, so that the live set (and the reader's memory) stays the same whatever the length.
// OOMS > 0: that many out-of-memory failures (cudaMalloc of more than the device holds: an E record
// with error 2 each, which `memguard oom` explains with the live set at it), spread evenly through
// the run, so that `oom` and `summary` read reports that have them.
//
// usage: memguard_bench_report_churn PAIRS [LIVE [OOMS]]
// Prints nothing; run it with LD_PRELOAD=libmemguard.so and MEMGUARD_OUTPUT set.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <vector>

namespace {

volatile int g_sink = 0;

void* must_alloc(size_t size) {
    void* p = nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        std::fprintf(stderr, "cudaMalloc failed\n");
        std::exit(1);
    }
    return p;
}

// Eight sites: the same call made through a different chain of frames each.
template <int N>
__attribute__((noinline)) void* site(size_t size) {
    void* p = N == 0 ? must_alloc(size) : site<(N > 0 ? N - 1 : 0)>(size);
    g_sink += 1;  // keeps the call from becoming a tail call
    return p;
}

void* alloc_at(int s, size_t size) {
    switch (s & 7) {
    case 0: return site<0>(size);
    case 1: return site<1>(size);
    case 2: return site<2>(size);
    case 3: return site<3>(size);
    case 4: return site<4>(size);
    case 5: return site<5>(size);
    case 6: return site<6>(size);
    default: return site<7>(size);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PAIRS [LIVE [OOMS]]\n", argv[0]);
        return 2;
    }
    const long pairs = std::atol(argv[1]);
    const long live = argc > 2 ? std::atol(argv[2]) : 1000;
    const long ooms = argc > 3 ? std::atol(argv[3]) : 0;
    if (pairs < 0 || live < 1 || ooms < 0) {
        std::fprintf(stderr, "%s: PAIRS and OOMS must be at least 0, LIVE at least 1\n", argv[0]);
        return 2;
    }
    // More than any device holds (the fake runtime's default is 16 GiB): the call fails.
    size_t device_total = 0, device_free = 0;
    if (cudaMemGetInfo(&device_free, &device_total) != cudaSuccess) device_total = size_t{1} << 40;
    long next_oom = ooms == 0 ? -1 : pairs / (ooms + 1), ooms_done = 0;
    std::vector<void*> lasting;
    for (int i = 0; i < 16; ++i) lasting.push_back(alloc_at(i, size_t{64} << 20));
    std::vector<void*> ring(static_cast<size_t>(live), nullptr);
    for (long i = 0; i < pairs; ++i) {
        void*& slot = ring[static_cast<size_t>(i % live)];
        if (slot != nullptr && cudaFree(slot) != cudaSuccess) {
            std::fprintf(stderr, "cudaFree failed\n");
            return 1;
        }
        // Sizes from 4 KiB to 4 MiB; the peak comes where the ring holds the most bytes.
        const size_t size = size_t{4096} << static_cast<size_t>((i * 7 + i / 1000) % 11);
        slot = alloc_at(static_cast<int>(i % 8), size);
        if (i == next_oom) {
            void* p = nullptr;
            if (cudaMalloc(&p, 2 * device_total) == cudaSuccess) {
                std::fprintf(stderr, "cudaMalloc of %zu bytes did not fail\n", 2 * device_total);
                return 1;
            }
            ++ooms_done;
            next_oom = ooms_done < ooms ? pairs / (ooms + 1) * (ooms_done + 1) : -1;
        }
    }
    for (void* p : ring) {
        if (p != nullptr) cudaFree(p);
    }
    for (void* p : lasting) cudaFree(p);
    return 0;
}

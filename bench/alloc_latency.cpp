// Allocation-plus-free latency through the caching allocator core (src/alloc), with a device
// backend that costs next to nothing, so that the numbers are the core's own: the cached path
// (a block of the size is free on the stream), a mixed pattern with many live blocks, and the
// same with threads sharing one device. No GPU; run: build/bin/memguard_bench_alloc [iterations]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "alloc/caching_allocator.h"

namespace {

using namespace memguard::alloc;

// Hands out increasing fake addresses; events are complete at once. Lock-free where the core
// calls it on every allocation (the capture flag), like the real backend.
class NullBackend final : public DeviceBackend {
public:
    int segment_malloc(int, size_t size, void** ptr) override {
        *ptr = reinterpret_cast<void*>(next_.fetch_add((size + 4095) & ~size_t{4095}));
        return kSuccess;
    }
    int segment_free(int, void*) override { return kSuccess; }
    int mem_info(int, size_t* f, size_t* t) override {
        *f = *t = size_t{1} << 40;
        return kSuccess;
    }
    int event_create(int, Event* e) override {
        *e = ++events_;
        return kSuccess;
    }
    int event_destroy(int, Event) override { return kSuccess; }
    int event_record(int, Event, Stream) override { return kSuccess; }
    int event_query(int, Event) override { return kSuccess; }
    int event_synchronize(int, Event) override { return kSuccess; }
    bool stream_capturing(int, Stream) override { return false; }
    bool any_capture_active(int) override { return capturing_.load(std::memory_order_relaxed); }
    int exchange_capture_mode(int*) override { return kSuccess; }

private:
    std::atomic<uintptr_t> next_{uintptr_t{1} << 44};
    std::atomic<Event> events_{0};
    std::atomic<bool> capturing_{false};
};

double now_ns() {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One block allocated and freed over and over: the cached path.
double cached_ns(CachingAllocator& a, size_t size, int iters) {
    void* warm = a.malloc(0, size, 1);
    a.free(warm);
    const double t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
        void* p = a.malloc(0, size, 1);
        a.free(p);
    }
    return (now_ns() - t0) / iters;
}

// 256 live blocks of mixed sizes (mostly small, as in a training step); each step frees a random
// one and allocates a new one.
double mixed_ns(CachingAllocator& a, int iters, uint64_t seed, Stream stream) {
    std::mt19937_64 rng(seed);
    auto size = [&] {
        const unsigned r = static_cast<unsigned>(rng() % 100);
        if (r < 70) return size_t{512} << (rng() % 11);             // 512 B .. 512 KiB
        if (r < 95) return (size_t{1} << 20) + rng() % (8u << 20);  // 1 .. 9 MiB
        return (size_t{16} << 20) + rng() % (48u << 20);            // 16 .. 64 MiB
    };
    std::vector<void*> live;
    for (int i = 0; i < 256; ++i) live.push_back(a.malloc(0, size(), stream));
    const double t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
        const size_t k = rng() % live.size();
        a.free(live[k]);
        live[k] = a.malloc(0, size(), stream);
    }
    const double ns = (now_ns() - t0) / iters;
    for (void* p : live) a.free(p);
    return ns;
}

}  // namespace

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::max(1000, std::atoi(argv[1])) : 2000000;
    NullBackend backend;
    std::printf("caching allocator core, malloc+free pairs (ns per pair), %d iterations\n", iters);
    std::printf("%-28s %10s\n", "pattern", "ns/pair");
    {
        CachingAllocator a(backend, 1);
        for (size_t size : {size_t{512}, size_t{4096}, size_t{64} << 10, size_t{1} << 20, size_t{4} << 20,
                            size_t{32} << 20, size_t{256} << 20}) {
            char name[64];
            std::snprintf(name, sizeof name, "cached %zu B", size);
            std::printf("%-28s %10.1f\n", name, cached_ns(a, size, iters));
        }
        std::printf("%-28s %10.1f\n", "mixed, 256 live", mixed_ns(a, iters, 1, 1));
    }
    for (int threads : {2, 4}) {
        CachingAllocator a(backend, 1);
        std::vector<double> ns(threads);
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] { ns[t] = mixed_ns(a, iters / threads, 7 + t, 1 + t); });
        for (auto& t : ts) t.join();
        double sum = 0;
        for (double v : ns) sum += v;
        char name[64];
        std::snprintf(name, sizeof name, "mixed, %d threads (each)", threads);
        std::printf("%-28s %10.1f\n", name, sum / threads);
    }
    return 0;
}

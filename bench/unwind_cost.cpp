// What a StackMemo miss costs against an unwind without slots (docs/benchmarks.md): the process's
// NativeUnwinder captures the same stack, `depth` frames deep, with capture() (libunwind's fast
// trace) and with capture_with_slots() (its cursor, frame by frame), arms interleaved in rounds.
//   build/bin/memguard_bench_unwind [depth] [iterations] [rounds]
// prints per round "fast <ns> slots <ns>" per capture, and the frames each returned.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "track/unwind.h"

namespace {

using memguard::track::NativeUnwinder;

NativeUnwinder* g_unwinder = nullptr;
volatile int g_sink = 0;

struct Result {
    double fast_ns = 0, slots_ns = 0;
    int fast_frames = 0, slots_frames = 0;
};

__attribute__((noinline)) void measure(int iterations, Result& r) {
    uintptr_t ips[128], slots[128];
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) r.fast_frames = g_unwinder->capture(ips, 128);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) r.slots_frames = g_unwinder->capture_with_slots(ips, slots, 128, 128, nullptr);
    auto t2 = std::chrono::steady_clock::now();
    r.fast_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / iterations;
    r.slots_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / iterations;
}

__attribute__((noinline)) void chain(int depth, int iterations, Result& r) {
    if (depth > 0) {
        chain(depth - 1, iterations, r);
        g_sink = g_sink + 1;  // not a tail call: every level keeps its frame
        return;
    }
    measure(iterations, r);
}

}  // namespace

int main(int argc, char** argv) {
    int depth = argc > 1 ? std::atoi(argv[1]) : 35;
    int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
    int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    NativeUnwinder unwinder;
    g_unwinder = &unwinder;
    std::printf("unwinder %s depth %d iterations %d\n", unwinder.name(), depth, iterations);
    for (int round = 0; round < rounds; ++round) {
        Result r;
        chain(depth, iterations, r);
        std::printf("fast %.0f ns (%d frames) slots %.0f ns (%d frames)\n", r.fast_ns, r.fast_frames, r.slots_ns,
                    r.slots_frames);
    }
    return 0;
}

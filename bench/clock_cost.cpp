// What a timestamp and a lock cost on this machine (docs/benchmarks.md, allocator mode): the
// clocks a hook could read (CLOCK_MONOTONIC through the vDSO, its coarse variant, the time-stamp
// counter) and an uncontended mutex. No dependencies:
//   g++ -O2 bench/clock_cost.cpp -o /tmp/clock_cost && /tmp/clock_cost
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <x86intrin.h>

namespace {
template <typename F>
double per(F f, long n) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}
volatile long sink;

}  // namespace

int main() {
    const long n = 2000000;
    for (int r = 0; r < 3; ++r) {
        timespec ts;
        std::mutex m;
        std::printf("monotonic %.1f ns, monotonic_coarse %.1f ns, realtime %.1f ns, rdtsc %.1f ns, rdtscp %.1f ns, "
                    "mutex %.1f ns\n",
                    per(
                        [&] {
                            clock_gettime(CLOCK_MONOTONIC, &ts);
                            sink += ts.tv_nsec;
                        },
                        n),
                    per(
                        [&] {
                            clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
                            sink += ts.tv_nsec;
                        },
                        n),
                    per(
                        [&] {
                            clock_gettime(CLOCK_REALTIME, &ts);
                            sink += ts.tv_nsec;
                        },
                        n),
                    per([&] { sink += __rdtsc(); }, n),
                    per(
                        [&] {
                            unsigned a;
                            sink += __rdtscp(&a);
                        },
                        n),
                    per(
                        [&] {
                            m.lock();
                            sink += 1;
                            m.unlock();
                        },
                        n));
    }
}

// The locks of the allocation path: the report buffer's (taken for every record, held for a copy)
// and allocator mode's device locks (taken for every allocation and free, held for the pools'
// bookkeeping, and rarely for long: a device allocation, an event wait, empty_cache). Taking one
// is one atomic exchange and releasing it a plain store, where a std::mutex costs a call into
// glibc and a second atomic instruction (which, like the first, waits for the thread's earlier
// stores to reach the cache: on the allocation path of PyTorch's process those are often
// misses). A thread that finds it taken spins briefly, then yields the CPU, then sleeps 50 us at a
// time until it is free: its holder may have been preempted, or be in one of the long holds.
#pragma once

#include <atomic>
#include <sched.h>
#include <time.h>

namespace memguard {

class SpinLock {
public:
    void lock() noexcept {
        if (!held_.exchange(true, std::memory_order_acquire)) return;
        lock_contended();
    }
    bool try_lock() noexcept { return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire); }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }

private:
    static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield" ::: "memory");
#endif
    }
    __attribute__((noinline)) void lock_contended() noexcept {
        for (unsigned waits = 0;;) {
            // Wait until it looks free before trying again: an exchange on a held lock would take
            // the cache line away from the holder for nothing.
            while (held_.load(std::memory_order_relaxed)) {
                if (waits < kSpins) {
                    relax();
                } else if (waits < kSpins + kYields) {
                    sched_yield();
                } else {
                    // A real-time thread's sched_yield never lets a holder of lower priority
                    // run: sleeping does.
                    const timespec pause{0, 50'000};
                    nanosleep(&pause, nullptr);
                }
                ++waits;
            }
            if (!held_.exchange(true, std::memory_order_acquire)) return;
        }
    }
    static constexpr unsigned kSpins = 64;
    static constexpr unsigned kYields = 64;

    std::atomic<bool> held_{false};
};

}  // namespace memguard

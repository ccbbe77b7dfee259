// The locks of the allocation path: the report buffer's (taken for every record, held for a copy)
// and allocator mode's device locks (taken for every allocation and free, held for the pools'
// bookkeeping and sometimes long: a device allocation, an event wait, empty_cache).
//
// A futex mutex (the classic three states: free, held, held with sleepers) inlined into its
// callers: uncontended, taking it is one compare-exchange and releasing it one exchange, with no
// call into glibc and no dispatch on a mutex kind (std::mutex's lock and unlock cost about 110
// instructions per allocation and free in allocator mode, callgrind). A waiter spins briefly, then
// sleeps in the kernel until a release wakes it: a long hold costs waiters no CPU, and the lock
// changes hands as promptly as a std::mutex (unfair like it: a holder that re-takes it at once can
// keep a waiter out). The release is not a plain store: it must see whether someone sleeps. (A
// spin lock released by a plain store, a8dafff, measured 2.7% lower `torch.empty` latency than
// std::mutex on the H200, but its waiters could only poll: docs/benchmarks.md.) errno is kept:
// the hooks that take these locks run inside the host's calls.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memguard {

class FutexLock {
public:
    void lock() noexcept {
        if (!try_lock()) lock_contended();
    }
    bool try_lock() noexcept {
        uint32_t expected = kFree;
        return state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
    }
    void unlock() noexcept {
        if (state_.exchange(kFree, std::memory_order_release) == kSleepers) wake_one();
    }

private:
    static constexpr uint32_t kFree = 0, kHeld = 1, kSleepers = 2;
    static constexpr int kSpins = 100;

    static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield" ::: "memory");
#endif
    }
    __attribute__((noinline)) void lock_contended() noexcept {
        // A short hold (a record's copy) ends while we spin: take it without sleeping. Only look
        // while spinning, so that the holder keeps its cache line.
        for (int i = 0; i < kSpins; ++i) {
            relax();
            if (state_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
        }
        // Mark the lock as having sleepers before sleeping, so that its release wakes one. Taking it
        // here leaves the mark on: one release too many wakes nobody, one too few would lose a
        // sleeper.
        const int saved_errno = errno;
        while (state_.exchange(kSleepers, std::memory_order_acquire) != kFree) {
            // Returns at once (EAGAIN) when the state is no longer kSleepers: released meanwhile.
            syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kSleepers, nullptr, nullptr,
                    0);
        }
        errno = saved_errno;
    }
    __attribute__((noinline)) void wake_one() noexcept {
        const int saved_errno = errno;
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
        errno = saved_errno;
    }

    std::atomic<uint32_t> state_{kFree};
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "the futex word is the atomic itself");
};

}  // namespace memguard

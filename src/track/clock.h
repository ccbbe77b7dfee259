// Time and thread identity on the hook path.
#pragma once

#include <cstdint>
#include <ctime>
#include <sys/syscall.h>
#include <unistd.h>

namespace memguard::track {

/// CLOCK_MONOTONIC in nanoseconds (vDSO, no system call).
inline int64_t monotonic_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline int64_t realtime_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline thread_local uint64_t t_cached_tid = 0;

/// Kernel thread id of the calling thread, cached per thread.
inline uint64_t current_tid() noexcept {
    if (t_cached_tid == 0) t_cached_tid = static_cast<uint64_t>(syscall(SYS_gettid));
    return t_cached_tid;
}

/// Forgets the cached tid (after fork the child's thread has a new tid).
inline void reset_tid_cache() noexcept { t_cached_tid = 0; }

}  // namespace memguard::track

// Time and thread identity on the hook path, and the run's clock as the recorder sees it.
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

/// The run's time, injected into the recorder and its sink (system_clock.h is the real one,
/// testing/fake_clock.h the tests'). Two ways to read it: now(), and for the records written on
/// every tensor allocation and free a stamp, cheaper to make on the hook path and turned into
/// now()'s time on the thread that writes the records out (stamp_clock.h says why).
///
/// Thread safety: now(), stamp() and time_of_stamp() from any thread; restart() only while no
/// other thread records (a fork child); anchor() from one writing thread at a time.
class Clock {
public:
    virtual ~Clock() = default;
    /// Nanoseconds since the run's origin: the time of every record.
    virtual int64_t now() const noexcept = 0;
    /// The origin as Unix time in nanoseconds (the header's t0_unix_ns).
    virtual int64_t origin_unix_ns() const noexcept = 0;
    /// A new origin: a fork child is a new run.
    virtual void restart() noexcept = 0;
    /// A stamp of the present moment, for time_of_stamp() to convert later.
    virtual uint64_t stamp() const noexcept = 0;
    /// Writer side, before converting a batch of stamps: every stamp in it was made before.
    virtual void anchor() noexcept = 0;
    /// now()'s time of a stamp made since the origin; after the anchor() of its batch.
    virtual int64_t time_of_stamp(uint64_t stamp) const noexcept = 0;
};

}  // namespace memguard::track

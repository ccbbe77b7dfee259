// The time of the records written on every tensor allocation and free (allocator mode's T and t).
//
// Reading CLOCK_MONOTONIC costs 25-35 ns even through the vDSO (measured on the H200 machine and
// here), twice per allocation and free. Where the kernel itself keeps CLOCK_MONOTONIC with the
// CPU's time-stamp counter (clocksource "tsc": the kernel found it invariant and synchronized
// across CPUs), the hook reads the counter instead (rdtsc) and the writer thread turns the count
// into CLOCK_MONOTONIC nanoseconds when it formats the record: the vDSO does the same
// arithmetic, with the kernel's own scale. Elsewhere a stamp is CLOCK_MONOTONIC itself.
//
// The conversion uses pairs of (count, CLOCK_MONOTONIC) read together: one when recording
// started, then one the writer reads before it formats each batch (anchor()), after every stamp
// in the batch was made. A stamp is placed back from the newest pair at the rate measured since
// an earlier pair at least 10 ms older, so a batch's stamps lie between the two pairs and the
// error stays within the error of reading them (tens of nanoseconds), however long the run and
// however NTP slews CLOCK_MONOTONIC.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace memguard::track::stamp {

namespace detail {
inline bool g_counter = false;  // set once, before recording starts (init)
}

/// Decides, once, whether stamps are counter reads (the kernel's clocksource is "tsc"); reads
/// the first pair. Called before the first stamp; later calls do nothing.
void init() noexcept;

/// CLOCK_MONOTONIC nanoseconds as a stamp (what now() returns without the counter).
uint64_t monotonic_stamp() noexcept;

/// A stamp: the time-stamp counter, or CLOCK_MONOTONIC nanoseconds.
inline uint64_t now() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    if (detail::g_counter) return __rdtsc();
#endif
    return monotonic_stamp();
}

/// Turns stamps made since init() into CLOCK_MONOTONIC nanoseconds.
class Converter {
public:
    /// The pair read when recording started; `counter` false: stamps are nanoseconds already.
    void start(bool counter, uint64_t count, int64_t ns) noexcept;
    /// A later pair, read after every stamp that is converted next was made.
    void anchor(uint64_t count, int64_t ns) noexcept;
    int64_t to_monotonic_ns(uint64_t stamp) const noexcept;

    static constexpr int64_t kMinSpanNs = 10'000'000;

private:
    bool counter_ = false;
    uint64_t base_count_ = 0, last_count_ = 0;
    int64_t base_ns_ = 0, last_ns_ = 0;
    double ns_per_count_ = 1.0;
};

/// The process's converter: anchor_now() reads a new pair (the writer, before each batch, with
/// its I/O lock held); to_monotonic_ns converts with the last one.
void anchor_now() noexcept;
int64_t to_monotonic_ns(uint64_t stamp) noexcept;

}  // namespace memguard::track::stamp

// The time of the records written on every tensor allocation and free (allocator mode's T and t).
//
// Reading CLOCK_MONOTONIC costs 25-35 ns even through the vDSO (measured on the H200 machine and
// here), twice per allocation and free. Where the kernel itself keeps CLOCK_MONOTONIC with the
// CPU's time-stamp counter (clocksource "tsc": the kernel found it invariant and synchronized
// across CPUs), the hook reads the counter instead (rdtsc) and the writer thread turns the count
// into CLOCK_MONOTONIC nanoseconds when it formats the record: the vDSO does the same
// arithmetic, with the kernel's own scale. Elsewhere a stamp is CLOCK_MONOTONIC itself. A
// counter stamp carries kCounterBit, so each stamp says what it is: when the kernel gives up the
// counter during the run (its watchdog found it unstable), the writer sees the new clocksource at
// its next batch and the hooks go back to CLOCK_MONOTONIC from then on.
//
// The conversion uses pairs of (count, CLOCK_MONOTONIC) read together: one when recording
// started, then one the writer reads before it formats each batch (anchor()), after every stamp
// in the batch was made. A stamp is placed back from the newest pair at the rate measured since
// an earlier pair (the one before it, once that is at least 10 ms older), so the stamps of a
// batch lie between the two pairs. While CLOCK_MONOTONIC's rate is steady the error is that of
// reading the pairs (4 ns worst over 30 million stamps on the development VM). NTP or chrony
// changing that rate by d during a batch (at most 250 ms) moves a stamp by up to d x 62 ms: 6 us
// for a change of 100 ppm.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace memguard::track::stamp {

/// Marks a counter stamp (a counter reaches bit 63 after about a century at 3 GHz).
constexpr uint64_t kCounterBit = uint64_t{1} << 63;

namespace detail {
inline std::atomic<bool> g_counter{false};  // set by init(); cleared if the kernel leaves the tsc
/// Tests: the file that names the kernel's clocksource (sysfs's current_clocksource).
void set_clocksource_file(const char* path) noexcept;
}  // namespace detail

/// Decides, once, whether stamps are counter reads (the kernel's clocksource is "tsc"); reads
/// the first pair. Called before the first stamp; later calls do nothing.
void init() noexcept;

/// CLOCK_MONOTONIC nanoseconds as a stamp (what now() returns without the counter).
uint64_t monotonic_stamp() noexcept;

/// A stamp: the time-stamp counter with kCounterBit, or CLOCK_MONOTONIC nanoseconds.
inline uint64_t now() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    if (detail::g_counter.load(std::memory_order_relaxed)) return __rdtsc() | kCounterBit;
#endif
    return monotonic_stamp();
}

/// Turns stamps made since start() into CLOCK_MONOTONIC nanoseconds.
class Converter {
public:
    /// The pair read when recording started.
    void start(uint64_t count, int64_t ns) noexcept;
    /// A later pair, read after every stamp that is converted next was made.
    void anchor(uint64_t count, int64_t ns) noexcept;
    /// A counter stamp (kCounterBit) converted; any other stamp is nanoseconds already.
    int64_t to_monotonic_ns(uint64_t stamp) const noexcept;

    static constexpr int64_t kMinSpanNs = 10'000'000;

private:
    uint64_t base_count_ = 0, last_count_ = 0;
    int64_t base_ns_ = 0, last_ns_ = 0;
    double ns_per_count_ = 1.0;
};

/// The process's converter, on the writer's side (its I/O lock held): anchor_now() reads a new
/// pair, and first whether the kernel still keeps time with the counter; to_monotonic_ns
/// converts with the last pair.
void anchor_now() noexcept;
int64_t to_monotonic_ns(uint64_t stamp) noexcept;

}  // namespace memguard::track::stamp

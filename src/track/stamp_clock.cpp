#include "track/stamp_clock.h"

#include <atomic>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "track/clock.h"

namespace memguard::track::stamp {

namespace {

Converter g_converter;

std::atomic<const char*> g_clocksource_file{"/sys/devices/system/clocksource/clocksource0/current_clocksource"};

/// The kernel keeps CLOCK_MONOTONIC with the time-stamp counter.
bool kernel_uses_tsc() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    int fd = ::open(g_clocksource_file.load(std::memory_order_relaxed), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[32] = {};
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
#else
    return false;
#endif
}

/// A (counter, CLOCK_MONOTONIC) pair read together: the counter between two clock reads, and
/// the clock's midpoint, from the closest of a few tries (an interrupt can fall between reads).
void read_pair(uint64_t* count, int64_t* ns) noexcept {
#if defined(__x86_64__) || defined(__i386__)
    int64_t best = -1;
    for (int i = 0; i < 4; ++i) {
        const int64_t a = monotonic_ns();
        const uint64_t c = __rdtsc();
        const int64_t b = monotonic_ns();
        if (best < 0 || b - a < best) {
            best = b - a;
            *count = c;
            *ns = a + (b - a) / 2;
        }
    }
#else
    *ns = monotonic_ns();
    *count = static_cast<uint64_t>(*ns);
#endif
}

}  // namespace

void detail::set_clocksource_file(const char* path) noexcept {
    g_clocksource_file.store(path, std::memory_order_relaxed);
}

uint64_t monotonic_stamp() noexcept { return static_cast<uint64_t>(monotonic_ns()); }

void init() noexcept {
    static pthread_once_t once = PTHREAD_ONCE_INIT;  // not std::call_once: see runtime/startup.cpp
    pthread_once(&once, [] {
        uint64_t count = 0;
        int64_t ns = 0;
        read_pair(&count, &ns);
        g_converter.start(count, ns);
        detail::g_counter.store(kernel_uses_tsc(), std::memory_order_relaxed);
    });
}

void Converter::start(uint64_t count, int64_t ns) noexcept {
    base_count_ = last_count_ = count;
    base_ns_ = last_ns_ = ns;
    ns_per_count_ = 1.0;
}

void Converter::anchor(uint64_t count, int64_t ns) noexcept {
    if (count <= last_count_ || ns <= last_ns_) return;  // no span: keep the last pair
    // The base moves up to the last pair once that is at least kMinSpanNs older than this one;
    // until then it stays where it was (at first, the pair of start()). Either way the stamps of
    // the batch this pair ends lie between the base and this pair, and a span of 10 ms or more
    // keeps the pairs' reading error out of the rate.
    if (ns - last_ns_ >= kMinSpanNs) {
        base_count_ = last_count_;
        base_ns_ = last_ns_;
    }
    last_count_ = count;
    last_ns_ = ns;
    ns_per_count_ = static_cast<double>(last_ns_ - base_ns_) / static_cast<double>(last_count_ - base_count_);
}

int64_t Converter::to_monotonic_ns(uint64_t stamp) const noexcept {
    if ((stamp & kCounterBit) == 0) return static_cast<int64_t>(stamp);
    const uint64_t count = stamp & ~kCounterBit;
    // Placed back from the later pair (a stamp is older than it). A stamp a little newer than
    // the pair (another CPU's counter, a stamp made while the pair was read) goes forward.
    const double d = count <= last_count_ ? -static_cast<double>(last_count_ - count)
                                          : static_cast<double>(count - last_count_);
    return last_ns_ + static_cast<int64_t>(d * ns_per_count_);
}

void anchor_now() noexcept {
    if (!detail::g_counter.load(std::memory_order_relaxed)) return;
    if (!kernel_uses_tsc()) {
        // The kernel gave up the counter (its watchdog found it unstable): new stamps are
        // CLOCK_MONOTONIC; those already made are converted with the pairs read so far.
        detail::g_counter.store(false, std::memory_order_relaxed);
    }
    uint64_t count = 0;
    int64_t ns = 0;
    read_pair(&count, &ns);
    g_converter.anchor(count, ns);
}

int64_t to_monotonic_ns(uint64_t stamp) noexcept { return g_converter.to_monotonic_ns(stamp); }

}  // namespace memguard::track::stamp

#include "track/system_clock.h"

#include "track/stamp_clock.h"

namespace memguard::track {

SystemClock::SystemClock() noexcept {
    restart();
    stamp::init();
}

void SystemClock::restart() noexcept {
    origin_mono_.store(monotonic_ns(), std::memory_order_relaxed);
    origin_unix_.store(realtime_ns(), std::memory_order_relaxed);
}

void SystemClock::anchor() noexcept { stamp::anchor_now(); }

int64_t SystemClock::time_of_stamp(uint64_t s) const noexcept {
    // A stamp made right at the origin can convert a few nanoseconds before it.
    const int64_t t = stamp::to_monotonic_ns(s) - origin_mono_.load(std::memory_order_relaxed);
    return t < 0 ? 0 : t;
}

}  // namespace memguard::track

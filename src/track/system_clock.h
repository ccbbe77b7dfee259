// The run's clock in production: CLOCK_MONOTONIC from an origin taken when the run starts, and
// stamps from stamp_clock.h (the time-stamp counter where the kernel keeps time with it).
#pragma once

#include <atomic>
#include <cstdint>

#include "track/clock.h"
#include "track/stamp_clock.h"

namespace memguard::track {

class SystemClock final : public Clock {
public:
    /// Takes the origin, and decides once per process how stamps are made (stamp::init).
    SystemClock() noexcept;

    int64_t now() const noexcept override { return monotonic_ns() - origin_mono_.load(std::memory_order_relaxed); }
    int64_t origin_unix_ns() const noexcept override { return origin_unix_.load(std::memory_order_relaxed); }
    void restart() noexcept override;
    /// Inline: allocator mode stamps every tensor record with it (records_tensors.cpp).
    uint64_t stamp() const noexcept override { return stamp::now(); }
    void anchor() noexcept override;
    int64_t time_of_stamp(uint64_t stamp) const noexcept override;

private:
    std::atomic<int64_t> origin_mono_{0};
    std::atomic<int64_t> origin_unix_{0};
};

}  // namespace memguard::track

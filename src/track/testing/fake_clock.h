// A clock for tests: it stands still until the test moves it. Stamps are its time plus an offset
// that only time_of_stamp() takes off again, so a stamp written out unconverted shows.
#pragma once

#include <atomic>
#include <cstdint>

#include "track/clock.h"

namespace memguard::track::testing {

class FakeClock final : public Clock {
public:
    static constexpr uint64_t kStampOffset = 1'000'000'000'000;
    static constexpr int64_t kOriginUnixNs = 1'700'000'000'000'000'000;

    void set(int64_t t) noexcept { t_.store(t); }
    void advance(int64_t ns) noexcept { t_.fetch_add(ns); }
    /// The header's I t0_unix_ns (a report's follower takes a process that started after it for
    /// another one: a test whose process writes a followed report sets it to the real time).
    void set_origin_unix_ns(int64_t ns) noexcept { origin_unix_.store(ns); }
    /// restart() calls and anchor() calls so far.
    int restarts() const noexcept { return restarts_.load(); }
    int anchors() const noexcept { return anchors_.load(); }

    int64_t now() const noexcept override { return t_.load(); }
    /// The origin moves on at every restart by the time that had passed.
    int64_t origin_unix_ns() const noexcept override { return origin_unix_.load(); }
    void restart() noexcept override {
        origin_unix_.fetch_add(t_.exchange(0));
        restarts_.fetch_add(1);
    }
    uint64_t stamp() const noexcept override { return static_cast<uint64_t>(t_.load()) + kStampOffset; }
    void anchor() noexcept override { anchors_.fetch_add(1); }
    int64_t time_of_stamp(uint64_t stamp) const noexcept override { return static_cast<int64_t>(stamp - kStampOffset); }

private:
    std::atomic<int64_t> t_{0};
    std::atomic<int64_t> origin_unix_{kOriginUnixNs};
    std::atomic<int> restarts_{0};
    std::atomic<int> anchors_{0};
};

}  // namespace memguard::track::testing

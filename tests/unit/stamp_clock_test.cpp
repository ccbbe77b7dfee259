// The conversion of allocator-mode record stamps (time-stamp counter reads) to CLOCK_MONOTONIC
// nanoseconds (track/stamp_clock.h), with made-up pairs, and the process's stamps against the
// clock they are converted to.
#include <gtest/gtest.h>

#include <cstdlib>

#include <thread>
#include <unistd.h>

#include "track/clock.h"
#include "track/stamp_clock.h"

namespace {

using memguard::track::stamp::Converter;
using memguard::track::stamp::kCounterBit;

/// A counter stamp of `count`.
uint64_t counter(uint64_t count) { return count | kCounterBit; }

TEST(StampClock, AStampWithoutTheCounterBitIsNanoseconds) {
    Converter c;
    c.start(1000, 1000);
    c.anchor(5000, 9000);
    EXPECT_EQ(c.to_monotonic_ns(123456789), 123456789);
}

TEST(StampClock, CountsArePlacedBackFromTheLaterPairAtTheMeasuredRate) {
    Converter c;
    // 2.5 counts per nanosecond: 1 s is 2.5e9 counts.
    c.start(10'000'000'000ull, 7'000'000'000);
    c.anchor(10'000'000'000ull + 2'500'000'000ull, 8'000'000'000);
    EXPECT_EQ(c.to_monotonic_ns(counter(10'000'000'000ull)), 7'000'000'000);                     // the first pair
    EXPECT_EQ(c.to_monotonic_ns(counter(10'000'000'000ull + 2'500'000'000ull)), 8'000'000'000);  // the later one
    EXPECT_EQ(c.to_monotonic_ns(counter(10'000'000'000ull + 1'250'000'000ull)), 7'500'000'000);
    // A stamp a little after the later pair (another CPU) goes forward at the same rate.
    EXPECT_EQ(c.to_monotonic_ns(counter(10'000'000'000ull + 2'500'000'250ull)), 8'000'000'100);
    // A later pair gives the rate since the one before it (CLOCK_MONOTONIC may have been slewed):
    // 0.5 ns per count over the last 6e9 counts.
    c.anchor(10'000'000'000ull + 8'500'000'000ull, 11'000'000'000);
    EXPECT_EQ(c.to_monotonic_ns(counter(10'000'000'000ull + 8'500'000'000ull - 2'000)), 11'000'000'000 - 1'000);
    // A pair less than 10 ms after the last keeps the older base: 1 ms more over 2e6 counts more,
    // measured from the pair before (3.001e9 ns over 6.002e9 counts: still 0.5 ns per count).
    c.anchor(10'000'000'000ull + 8'502'000'000ull, 11'001'000'000);
    EXPECT_EQ(c.to_monotonic_ns(counter(10'000'000'000ull + 8'502'000'000ull - 2'000)), 11'001'000'000 - 1'000);
    // Stamps of both kinds in one batch (the kernel left the counter meanwhile): each as it is.
    EXPECT_EQ(c.to_monotonic_ns(11'000'500'000), 11'000'500'000);
}

TEST(StampClock, APairWithNoSpanKeepsTheLastOne) {
    Converter c;
    c.start(1000, 500);
    c.anchor(3000, 1500);  // 2 counts per ns
    c.anchor(3000, 1500);  // the same pair again: nothing changes
    c.anchor(900, 400);    // before the last pair: ignored
    EXPECT_EQ(c.to_monotonic_ns(counter(2000)), 1000);
}

TEST(StampClock, StampsConvertToTheClockTheyWereMadeBetween) {
    // Whichever the machine uses (the counter where the kernel's clocksource is tsc): a stamp
    // converts to a time between the clock reads around it, within a microsecond.
    memguard::track::stamp::init();
    for (int i = 0; i < 5; ++i) {
        const int64_t before = memguard::track::monotonic_ns();
        const uint64_t s = memguard::track::stamp::now();
        const int64_t after = memguard::track::monotonic_ns();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        memguard::track::stamp::anchor_now();
        const int64_t t = memguard::track::stamp::to_monotonic_ns(s);
        EXPECT_GE(t, before - 1000) << i;
        EXPECT_LE(t, after + 1000) << i;
    }
}

TEST(StampClock, WhenTheKernelLeavesTheCounterNewStampsAreTheClock) {
#if defined(__x86_64__) || defined(__i386__)
    namespace stamp = memguard::track::stamp;
    stamp::init();
    const bool was = stamp::detail::g_counter.load();
    char path[] = "/tmp/memguard-clocksource.XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "hpet\n", 5), 5);
    close(fd);
    stamp::detail::g_counter.store(true);  // as where the kernel's clocksource was tsc at the start
    const int64_t before = memguard::track::monotonic_ns();
    const uint64_t old_stamp = stamp::now();
    const int64_t after = memguard::track::monotonic_ns();
    EXPECT_NE(old_stamp & stamp::kCounterBit, 0u);
    stamp::detail::set_clocksource_file(path);  // the watchdog moved the kernel to hpet
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    stamp::anchor_now();
    EXPECT_FALSE(stamp::detail::g_counter.load()) << "the writer's next batch sees the new clocksource";
    const uint64_t new_stamp = stamp::now();
    EXPECT_EQ(new_stamp & stamp::kCounterBit, 0u);
    // Both kinds convert: the counter stamp with the pairs read so far, the new one as it is.
    EXPECT_GE(stamp::to_monotonic_ns(old_stamp), before - 1000);
    EXPECT_LE(stamp::to_monotonic_ns(old_stamp), after + 1000);
    EXPECT_EQ(stamp::to_monotonic_ns(new_stamp), static_cast<int64_t>(new_stamp));
    stamp::detail::set_clocksource_file("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    stamp::detail::g_counter.store(was);
    unlink(path);
#else
    GTEST_SKIP() << "the counter is used on x86 only";
#endif
}

}  // namespace

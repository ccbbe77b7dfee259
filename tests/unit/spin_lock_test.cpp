// The allocation path's lock (src/common/spin_lock.h).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/spin_lock.h"

using memguard::SpinLock;

// More threads than this machine has cores increment a plain counter under the lock; a lost
// increment means two held it at once. Some hold it across a sleep, so that waiters get past
// spinning to yielding while the holder is off its CPU.
TEST(SpinLock, ExcludesAcrossThreadsThatSpinAndYield) {
    SpinLock lock;
    uint64_t counter = 0;
    constexpr int kThreads = 8, kIncrements = 50000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kIncrements; ++i) {
                std::lock_guard<SpinLock> guard(lock);
                const uint64_t seen = counter;
                if (t == 0 && i % 5000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
                counter = seen + 1;
            }
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(counter, uint64_t{kThreads} * kIncrements);
}

TEST(SpinLock, TryLockFailsWhileHeld) {
    SpinLock lock;
    ASSERT_TRUE(lock.try_lock());
    bool other = true;
    std::thread([&] { other = lock.try_lock(); }).join();
    EXPECT_FALSE(other);
    lock.unlock();
    std::thread([&] {
        other = lock.try_lock();
        if (other) lock.unlock();
    }).join();
    EXPECT_TRUE(other);
}

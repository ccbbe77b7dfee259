// The allocation path's lock (src/common/futex_lock.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/futex_lock.h"

using memguard::FutexLock;

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// Eight threads increment a plain counter under the lock; a lost increment means two held it at
// once. One holds it across sleeps now and then, so that the others get past spinning to
// sleeping in the kernel and must be woken.
TEST(FutexLock, ExcludesSpinnersAndSleepers) {
    FutexLock lock;
    uint64_t counter = 0;
    constexpr int kThreads = 8, kIncrements = 50000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kIncrements; ++i) {
                std::lock_guard<FutexLock> guard(lock);
                const uint64_t seen = counter;
                if (t == 0 && i % 5000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
                counter = seen + 1;
            }
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(counter, uint64_t{kThreads} * kIncrements);
}

TEST(FutexLock, TryLockFailsWhileHeld) {
    FutexLock lock;
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

// A waiter that went to sleep in the kernel behind a long hold (a device lock across cudaMalloc or
// an event wait) is woken by the release, not left to notice it later. In a child process with an
// alarm, so that a lock that never wakes its sleepers fails the test instead of hanging it.
TEST(FutexLock, AReleaseWakesASleepingWaiter) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        FutexLock lock;
        std::atomic<int64_t> released_ns{0};
        std::atomic<int64_t> acquired_ns{0};
        lock.lock();
        std::thread waiter([&] {
            lock.lock();
            acquired_ns = Clock::now().time_since_epoch().count();
            lock.unlock();
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // long past its spinning
        released_ns = Clock::now().time_since_epoch().count();
        lock.unlock();
        waiter.join();
        const double handover_ms = static_cast<double>(acquired_ns - released_ns) / 1e6;
        std::printf("handover after a 100 ms hold: %.3f ms\n", handover_ms);
        std::fflush(stdout);
        _exit(handover_ms < 50.0 ? 0 : 3);  // a prompt wake takes microseconds
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "the child was killed (signal " << WTERMSIG(status)
                                   << "): a sleeping waiter was never woken";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the waiter took more than 50 ms to take a released lock";
}

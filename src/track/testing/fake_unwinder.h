// An unwinder for tests: every capture returns the frames it was given (innermost first),
// whatever thread asks. Its "own code" is a range the test sets (none by default), so that
// the recorder's dropping of its own frames can be driven too.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "track/unwind.h"

namespace memguard::track::testing {

class FakeUnwinder final : public Unwinder {
public:
    void set_frames(std::vector<uintptr_t> frames) {
        std::lock_guard<std::mutex> lock(mu_);
        frames_ = std::move(frames);
    }
    void set_own_code(TextRange range) noexcept { own_code_ = range; }
    /// capture() calls so far, and the `max` of the last one.
    int captures() const noexcept { return captures_.load(); }
    int last_max() const noexcept { return last_max_.load(); }
    /// True between before_fork() and after_fork().
    bool fork_blocked() const noexcept { return fork_blocked_.load(); }

    int capture(uintptr_t* ips, int max) noexcept override {
        std::lock_guard<std::mutex> lock(mu_);
        captures_.fetch_add(1);
        last_max_.store(max);
        int n = 0;
        for (; n < max && static_cast<size_t>(n) < frames_.size(); ++n) ips[n] = frames_[static_cast<size_t>(n)];
        return n;
    }
    TextRange own_code() const noexcept override { return own_code_; }
    const char* name() const noexcept override { return "fake"; }
    void before_fork() noexcept override { fork_blocked_.store(true); }
    void after_fork() noexcept override { fork_blocked_.store(false); }

private:
    std::mutex mu_;
    std::vector<uintptr_t> frames_;
    TextRange own_code_;
    std::atomic<int> captures_{0};
    std::atomic<int> last_max_{0};
    std::atomic<bool> fork_blocked_{false};
};

}  // namespace memguard::track::testing

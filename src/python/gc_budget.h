// The time budget of memguard's own collections (MEMGUARD_GC_BUDGET), as a state machine fed events:
// no interpreter, no clock inside (time comes in as an argument), so that tests drive it with a fake
// clock.
//
// The rule. memguard's collections (after a compile, after a recomputed backward, at step ends) may
// take at most `fraction` of the wall time since the budget started. A trigger whose collection
// freed no CUDA memory while the total time spent is over that share backs off: it skips its next
// 1, then 2, 4, ... opportunities (doubling up to kMaxSkip), each trigger on its own, so a trigger
// that pays keeps running while one that does not goes quiet. The first collection of a trigger
// that frees CUDA memory restores it (no skips). A trigger that frees nothing but stays within the
// budget is left alone: cheap collections cost little whether or not they pay. "Opportunities", not
// time: a trigger fires at its own rhythm (a recompute trigger once per checkpointed layer, a step
// trigger once per N steps), so skipping 2^k of them scales with that rhythm.
#pragma once

#include <array>
#include <cstdint>

namespace memguard::python {

class GcBudget {
public:
    static constexpr int kTriggers = 3;         // Kind: compile, recompute, step
    static constexpr uint32_t kMaxSkip = 1024;  // the longest back-off, in skipped opportunities

    enum class Kind : uint8_t { Compile, Recompute, Step };

    /// `fraction` of wall time (MEMGUARD_GC_BUDGET, 0 < fraction <= 1; 1 never backs off).
    explicit GcBudget(double fraction = 0.01) noexcept : fraction_(fraction) {}

    /// Starts the budget's clock (the wall time the fraction is of) at `now_ns`, if not started.
    void start(int64_t now_ns) noexcept {
        if (!started_) {
            started_ = true;
            start_ns_ = now_ns;
        }
    }
    /// A trigger's opportunity to collect at `now_ns`: true to collect (then charge()), false to
    /// skip it (counted). The first call starts the budget's clock.
    bool allow(Kind k, int64_t now_ns) noexcept;
    /// The collection allowed last for `k` ran: it took `duration_ns` and freed `cuda_freed` bytes
    /// (<= 0: nothing, or not known: no CUDA in use).
    void charge(Kind k, int64_t duration_ns, int64_t cuda_freed, int64_t now_ns) noexcept;

    struct Totals {
        uint64_t collections = 0, skipped = 0;
        int64_t spent_ns = 0, cuda_freed = 0;
        uint32_t backoff = 0;  // the current back-off (skips after the next empty collection over budget: double)
    };
    const Totals& totals(Kind k) const noexcept { return per_[static_cast<int>(k)]; }
    int64_t spent_ns() const noexcept { return spent_ns_; }
    /// The share of wall time memguard's collections took so far (0 before the first).
    double used(int64_t now_ns) const noexcept;
    bool over_budget(int64_t now_ns) const noexcept;
    double fraction() const noexcept { return fraction_; }

private:
    struct PerTrigger : Totals {
        uint32_t skip_left = 0;
    };
    double fraction_;
    bool started_ = false;
    int64_t start_ns_ = 0;
    int64_t spent_ns_ = 0;
    std::array<PerTrigger, kTriggers> per_{};
};

}  // namespace memguard::python

#include "python/gc_budget.h"

#include <algorithm>

namespace memguard::python {

bool GcBudget::allow(Kind k, int64_t now_ns) noexcept {
    start(now_ns);
    PerTrigger& t = per_[static_cast<int>(k)];
    if (t.skip_left > 0) {
        --t.skip_left;
        ++t.skipped;
        return false;
    }
    return true;
}

void GcBudget::charge(Kind k, int64_t duration_ns, int64_t cuda_freed, int64_t now_ns) noexcept {
    PerTrigger& t = per_[static_cast<int>(k)];
    duration_ns = std::max<int64_t>(0, duration_ns);
    ++t.collections;
    t.spent_ns += duration_ns;
    spent_ns_ += duration_ns;
    if (cuda_freed > 0) {
        t.cuda_freed += cuda_freed;
        t.backoff = 0;  // it pays again: restored
        t.skip_left = 0;
        return;
    }
    if (!over_budget(now_ns)) return;
    t.backoff = t.backoff == 0 ? 1 : std::min(kMaxSkip, t.backoff * 2);
    t.skip_left = t.backoff;
}

double GcBudget::used(int64_t now_ns) const noexcept {
    int64_t elapsed = started_ ? now_ns - start_ns_ : 0;
    if (elapsed <= 0) return spent_ns_ > 0 ? 1.0 : 0.0;
    return static_cast<double>(spent_ns_) / static_cast<double>(elapsed);
}

bool GcBudget::over_budget(int64_t now_ns) const noexcept { return used(now_ns) > fraction_; }

}  // namespace memguard::python

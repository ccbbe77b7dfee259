#include "report/collections.h"

#include "report/saturate.h"

namespace memguard::report {

std::array<TriggerTotals, kTriggerCount> collection_totals(const Report& r) {
    // Summed in 128 bits: the values are the report's, and a report can hold any int64 there.
    struct Sums {
        SignedTotal duration_ns, collected, uncollectable, cuda_bytes_freed;
    };
    std::array<Sums, kTriggerCount> sums{};
    std::array<TriggerTotals, kTriggerCount> totals{};
    for (const Collection& c : r.collections) {
        const size_t i = trigger_index(c.trigger);
        ++totals[i].count;
        sums[i].duration_ns.add(c.duration_ns);
        sums[i].collected.add(c.collected);
        sums[i].uncollectable.add(c.uncollectable);
        if (c.cuda_bytes_freed) {
            sums[i].cuda_bytes_freed.add(*c.cuda_bytes_freed);
            ++totals[i].with_cuda;
        }
    }
    for (size_t i = 0; i < kTriggerCount; ++i) {
        totals[i].duration_ns = sums[i].duration_ns.value();
        totals[i].collected = sums[i].collected.value();
        totals[i].uncollectable = sums[i].uncollectable.value();
        totals[i].cuda_bytes_freed = sums[i].cuda_bytes_freed.value();
    }
    return totals;
}

bool collection_listed(const Collection& c, bool all) {
    if (all || c.trigger != GcTrigger::Automatic) return true;
    return c.cuda_bytes_freed.value_or(0) > 0;
}

}  // namespace memguard::report

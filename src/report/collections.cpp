#include "report/collections.h"

namespace memguard::report {

std::array<TriggerTotals, kTriggerCount> collection_totals(const Report& r) {
    std::array<TriggerTotals, kTriggerCount> totals{};
    for (const Collection& c : r.collections) {
        TriggerTotals& t = totals[trigger_index(c.trigger)];
        ++t.count;
        t.duration_ns += c.duration_ns;
        t.collected += c.collected;
        t.uncollectable += c.uncollectable;
        if (c.cuda_bytes_freed) {
            t.cuda_bytes_freed += *c.cuda_bytes_freed;
            ++t.with_cuda;
        }
    }
    return totals;
}

bool collection_listed(const Collection& c, bool all) {
    if (all || c.trigger != GcTrigger::Automatic) return true;
    return c.cuda_bytes_freed.value_or(0) > 0;
}

}  // namespace memguard::report

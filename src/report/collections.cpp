#include "report/collections.h"

#include <cmath>

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
        if (c.skipped) {
            add_to(totals[i].skipped, *c.skipped);
            ++totals[i].with_skipped;
        }
        if (c.explanation) ++totals[i].explained;
    }
    for (size_t i = 0; i < kTriggerCount; ++i) {
        totals[i].duration_ns = sums[i].duration_ns.value();
        totals[i].collected = sums[i].collected.value();
        totals[i].uncollectable = sums[i].uncollectable.value();
        totals[i].cuda_bytes_freed = sums[i].cuda_bytes_freed.value();
    }
    return totals;
}

TriggerTotals memguards_totals(const std::array<TriggerTotals, kTriggerCount>& totals) {
    SignedTotal duration_ns, collected, uncollectable, cuda_bytes_freed;
    TriggerTotals out;
    for (size_t i = 0; i < kTriggerCount; ++i) {
        if (!format::is_memguards(static_cast<GcTrigger>(i))) continue;
        const TriggerTotals& x = totals[i];
        add_to(out.count, x.count);
        duration_ns.add(x.duration_ns);
        collected.add(x.collected);
        uncollectable.add(x.uncollectable);
        cuda_bytes_freed.add(x.cuda_bytes_freed);
        add_to(out.with_cuda, x.with_cuda);
        add_to(out.skipped, x.skipped);
        add_to(out.with_skipped, x.with_skipped);
        add_to(out.explained, x.explained);
    }
    out.duration_ns = duration_ns.value();
    out.collected = collected.value();
    out.uncollectable = uncollectable.value();
    out.cuda_bytes_freed = cuda_bytes_freed.value();
    return out;
}

const char* trigger_label(GcTrigger t) { return t == GcTrigger::Memguard ? "compile" : trigger_name(t); }

std::optional<double> bytes_per_ms(const TriggerTotals& x) {
    if (x.with_cuda == 0 || x.duration_ns <= 0) return std::nullopt;
    return static_cast<double>(x.cuda_bytes_freed) / (static_cast<double>(x.duration_ns) / 1e6);
}

std::optional<double> budget_used(const Report& r, const TriggerTotals& memguards) {
    // A corrupt report can hold a negative end time or duration: no share then.
    if (!r.gc_budget || r.end_t <= 0 || memguards.duration_ns < 0) return std::nullopt;
    const double used = static_cast<double>(memguards.duration_ns) / (*r.gc_budget * static_cast<double>(r.end_t));
    if (!std::isfinite(used)) return std::nullopt;  // a budget like 1e-320: the share overflows
    return used;
}

std::optional<double> budget_used(const Report& r, GcTrigger t, const TriggerTotals& x) {
    if (!format::is_memguards(t)) return std::nullopt;
    return budget_used(r, x);
}

bool collection_listed(const Collection& c, bool all) {
    if (all || c.trigger != GcTrigger::Automatic) return true;
    return c.cuda_bytes_freed.value_or(0) > 0;
}

}  // namespace memguard::report

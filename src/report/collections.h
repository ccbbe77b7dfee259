// Figures about Python garbage collections and torch.compile compiles (format minor 2), and what
// memguard's own collections cost against their time budget (minor 9).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "report/report.h"

namespace memguard::report {

/// The sums are exact, clamped to the int64 range when the true sum is beyond it.
struct TriggerTotals {
    uint64_t count = 0;
    int64_t duration_ns = 0;
    int64_t collected = 0;
    int64_t uncollectable = 0;
    int64_t cuda_bytes_freed = 0;  // sum of the known values ('-' counts as nothing)
    uint64_t with_cuda = 0;        // collections whose CUDA bytes freed are known
    uint64_t skipped = 0;          // minor 9: chances the budget skipped (Y's skipped summed, saturating)
    uint64_t with_skipped = 0;     // collections that say how many were skipped
    uint64_t explained = 0;        // collections with an explanation
};

/// Totals per trigger, indexed by GcTrigger.
std::array<TriggerTotals, kTriggerCount> collection_totals(const Report& r);

/// The totals of memguard's own collections (format::is_memguards: compile, recompute, step).
TriggerTotals memguards_totals(const std::array<TriggerTotals, kTriggerCount>& totals);

inline size_t trigger_index(GcTrigger t) { return static_cast<size_t>(t); }

/// How the CLI's text names a trigger: the format's names, but `compile` for `memguard` (the
/// compile-garbage collection; minor 2 named it before memguard had other triggers). JSON keeps
/// the format's names.
const char* trigger_label(GcTrigger t);

/// CUDA bytes freed per millisecond of collection time; empty when nothing is known of CUDA
/// (no collection with a known value) or the collections took no time.
std::optional<double> bytes_per_ms(const TriggerTotals& x);

/// The share of memguard's time budget a trigger's collections used: their time / (gc_budget x the
/// run's wall time, Report::end_t). Empty for automatic and explicit collections (the budget is
/// memguard's), when the report has no `I gc_budget`, or when it has no wall time (or an absurd
/// budget makes the share infinite).
std::optional<double> budget_used(const Report& r, GcTrigger t, const TriggerTotals& x);
/// The same for the totals of memguard's collections together (what the budget rule compares).
std::optional<double> budget_used(const Report& r, const TriggerTotals& memguards);

/// Whether `memguard cycles` lists the collection: memguard's and explicit ones always, automatic
/// ones when they freed CUDA memory (more than 0 bytes), every one with `all`.
bool collection_listed(const Collection& c, bool all);

}  // namespace memguard::report

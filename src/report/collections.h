// Figures about Python garbage collections and torch.compile compiles (format minor 2).
#pragma once

#include <array>
#include <cstdint>

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
};

/// Totals per trigger, indexed by GcTrigger.
std::array<TriggerTotals, kTriggerCount> collection_totals(const Report& r);

inline size_t trigger_index(GcTrigger t) { return static_cast<size_t>(t); }

/// Whether `memguard cycles` lists the collection: memguard's and explicit ones always, automatic
/// ones when they freed CUDA memory (more than 0 bytes), every one with `all`.
bool collection_listed(const Collection& c, bool all);

}  // namespace memguard::report

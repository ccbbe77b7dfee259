// What GPU memory holds at a point of a run, by category (docs/categories.md): parameters,
// gradients, optimizer state, activations, ..., NCCL, workspaces, the allocator's cache. The one
// definition that `top --by category`, `summary`, `steps` and `oom` print.
//
// Tensor categories come from the moments' g records (the Python hook looked at the live tensors:
// exact where it saw them); the others from what the report says about each block: its native
// stack's modules and symbols, its Python stack, its private pool or capture, and PyTorch's
// allocator blocks of a moment (d) or allocator mode's tensor blocks (T). A part decided by a rule
// that can be wrong is marked `estimate`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/report.h"

namespace memguard::report {

/// One category's bytes at a point, with the sites that hold most of them.
struct CategoryPart {
    Category category = Category::Other;
    std::string detail;     // Library: the library's file name (libtransformer_engine.so); else empty
    uint64_t bytes = 0;
    uint64_t blocks = 0;    // tensor storages or blocks counted
    bool estimate = false;  // decided by a rule that can be wrong (docs/categories.md says which)
    std::vector<Site> sites;  // the largest sites of these bytes, largest first (at most `max_sites`)
};

/// GPU memory on one device at one point, split by category. The parts add up to `total`.
struct Breakdown {
    int device = -1;            // -1: every device
    size_t events_applied = 0;  // the point: after this prefix of Report::events
    int64_t t = 0;
    uint64_t total = 0;  // the GPU bytes live then (allocator mode: its segments' bytes)
    const Moment* moment = nullptr;  // the moment whose tags were used at this point (nullptr: none)
    std::vector<CategoryPart> parts;  // by bytes, descending; empty categories left out
};

struct BreakdownOptions {
    int device = -1;
    size_t max_sites = 3;
};

/// The breakdown after `events_applied` events. Tags come from the moments whose tensors were the
/// same blocks (allocator mode: the T block at a tagged address; interposition mode: the bytes a
/// tag covers inside a live segment), the nearest moment at or after the point within the same
/// step first.
Breakdown breakdown_at(const Report& r, size_t events_applied, const BreakdownOptions& options);

}  // namespace memguard::report

// Figures derived from a report (docs/report-format.md, "Derived figures"): the summary, the live set
// at a point in time, and live memory grouped by allocation site.
//
// Time semantics: events are replayed in file order. "GPU live bytes" count kinds device, async and
// managed; pinned host memory is tracked separately. The live set at time T is the state after every
// event that precedes, in file order, the first event with t > T.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "report/report.h"

namespace memguard::report {

constexpr size_t kKindCount = 4;
inline size_t kind_index(Kind k) { return static_cast<size_t>(k); }

struct KindStats {
    uint64_t allocations = 0;      // A records
    uint64_t frees = 0;            // blocks freed by the end (an F not undone by an R)
    uint64_t bytes_allocated = 0;  // sum of the sizes of all A records
    uint64_t peak_bytes = 0;       // most bytes of this kind live at once
    std::optional<int64_t> peak_t; // first time peak_bytes was reached; empty when it stayed 0
    uint64_t live_bytes_at_exit = 0;
    uint64_t live_blocks_at_exit = 0;
};

struct DeviceStats {
    uint64_t allocations = 0;  // GPU kinds only
    uint64_t bytes_allocated = 0;
    uint64_t failed_allocations = 0;
    uint64_t oom_events = 0;
    uint64_t peak_bytes = 0;
    std::optional<int64_t> peak_t;
    uint64_t live_bytes_at_exit = 0;
    uint64_t live_blocks_at_exit = 0;
};

struct Summary {
    uint64_t allocations = 0;  // all kinds, pinned included
    uint64_t frees = 0;        // all kinds: blocks freed by the end (an F not undone by an R)
    uint64_t failed_frees = 0; // R records that took effect
    uint64_t failed_allocations = 0;
    uint64_t oom_events = 0;
    uint64_t peak_bytes = 0;        // GPU live bytes
    std::optional<int64_t> peak_t;  // empty when no GPU memory was ever live
    size_t peak_events = 0;         // events (in file order) applied when the peak was first reached
    uint64_t live_bytes_at_exit = 0;   // GPU
    uint64_t live_blocks_at_exit = 0;  // GPU
    std::array<KindStats, kKindCount> by_kind;
    std::map<int, DeviceStats> by_device;  // GPU kinds, by device number
    int64_t duration_ns = 0;               // Report::end_t
    bool complete = false;

    // minor 1
    uint64_t captures = 0;              // C records
    uint64_t graphs_alive_at_exit = 0;  // captured graphs (c records with a graph) without a K
    uint64_t execs = 0;                 // G records
    uint64_t execs_alive_at_exit = 0;   // G records without a D
    uint64_t launches = 0;              // L records that named a live exec
    uint64_t unsafe_calls = 0;
    uint64_t frees_while_graph_alive = 0;
    uint64_t warmup_retention = 0;      // capture boundaries (capture, phase) with retained memory
    uint64_t hazards() const { return unsafe_calls + frees_while_graph_alive + warmup_retention; }
    // minor 2
    std::array<uint64_t, kTriggerCount> collections{};       // by GcTrigger
    std::array<int64_t, kTriggerCount> cuda_bytes_freed{};   // by GcTrigger: sum of the known values
    uint64_t compiles = 0;
};

Summary summarize(const Report& r);

struct TimePoint {
    enum Type { Peak, Exit, Time } type = Peak;
    int64_t t = 0;  // for Time: nanoseconds since the clock origin
};

struct LiveSet {
    size_t events_applied = 0;  // prefix of Report::events replayed
    int64_t t = 0;              // the time the set stands for (peak time, end time, or the requested time)
    std::vector<size_t> blocks; // indices into Report::blocks, in allocation order
};

/// The blocks live at a point in time (every kind; filter with the kind of each block).
LiveSet live_at(const Report& r, const TimePoint& at);

enum class KindFilter { Gpu, Pinned, All };
bool kind_matches(Kind k, KindFilter filter);

/// An allocation site: the native stack and the Python stack (minor 2; 0 when none) of the allocation.
struct Site {
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    uint64_t bytes = 0;
    uint64_t blocks = 0;
};

struct SiteTable {
    uint64_t total_bytes = 0;
    uint64_t total_blocks = 0;
    std::vector<Site> sites;  // by bytes, then blocks, descending; then by stack id, then Python stack id
};

/// Live blocks of the selected kinds grouped by allocation site (native stack id, Python stack id).
SiteTable group_by_site(const Report& r, const LiveSet& live, KindFilter filter);

/// The live blocks of one owner: ordinary memory, or the private pool of one stream capture.
struct Pool {
    uint32_t capture_id = 0;  // 0: ordinary memory (blocks owned by no capture)
    SiteTable table;
};

/// Live blocks of the selected kinds split by owner (Block::capture_id), each grouped by site:
/// ordinary memory first, then the capture pools by capture id. Only owners with live blocks.
std::vector<Pool> group_by_pool(const Report& r, const LiveSet& live, KindFilter filter);

}  // namespace memguard::report

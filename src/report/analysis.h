// Figures derived from a report (docs/report-format.md, "Derived figures"): the summary, the live set
// at a point in time, and live memory grouped by allocation site.
//
// Time semantics: events are replayed in file order by LevelWalk (report/levels.h), which defines
// "GPU live bytes": kinds device, async and managed plus physical memory (cuMemCreate) on devices;
// pinned host memory is tracked separately. The live set at time T is the state after every event
// that precedes, in file order, the first event with t > T.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "report/levels.h"
#include "report/report.h"

namespace memguard::report {

struct KindStats {
    uint64_t allocations = 0;       // A records
    uint64_t frees = 0;             // blocks freed by the end (an F not undone by an R)
    uint64_t bytes_allocated = 0;   // sum of the sizes of all A records
    uint64_t peak_bytes = 0;        // most bytes of this kind live at once
    std::optional<int64_t> peak_t;  // first time peak_bytes was reached; empty when it stayed 0
    uint64_t live_bytes_at_exit = 0;
    uint64_t live_blocks_at_exit = 0;
};

struct DeviceStats {
    uint64_t allocations = 0;  // GPU kinds only
    uint64_t bytes_allocated = 0;
    uint64_t failed_allocations = 0;
    uint64_t oom_events = 0;
    uint64_t peak_bytes = 0;  // GPU live bytes of this device (blocks and physical memory)
    std::optional<int64_t> peak_t;
    uint64_t live_bytes_at_exit = 0;    // blocks and physical memory
    uint64_t live_blocks_at_exit = 0;   // blocks only
    uint64_t live_handles_at_exit = 0;  // physical handles on this device whose memory exists at the end
};

/// Driver virtual memory management (format minor 3).
struct VirtualStats {
    bool any = false;  // the file has V, v, N, n, Q, q or m records that took effect
    uint64_t reserves = 0, address_frees = 0, creates = 0, releases = 0, maps = 0, unmaps = 0;
    uint64_t imports = 0;                // m records: other processes' memory mapped here (counted in no figure)
    uint64_t imported_mapped_bytes = 0;  // at the end: the mappings of imported handles (in mapped_bytes)
    // at the end of the file
    uint64_t reserved_bytes = 0;
    uint64_t mapped_bytes = 0;
    uint64_t physical_bytes = 0;         // every location
    uint64_t physical_device_bytes = 0;  // on devices (part of GPU live bytes)
    uint64_t physical_handles = 0;
    uint64_t physical_device_handles = 0;
    uint64_t peak_reserved_bytes = 0;
    uint64_t peak_mapped_bytes = 0;
    uint64_t peak_physical_bytes = 0;
    std::optional<int64_t> peak_mapped_t, peak_physical_t;
};

struct Summary {
    uint64_t allocations = 0;   // all kinds, pinned included
    uint64_t frees = 0;         // all kinds: blocks freed by the end (an F not undone by an R)
    uint64_t failed_frees = 0;  // R records that took effect
    uint64_t failed_allocations = 0;
    uint64_t oom_events = 0;
    uint64_t peak_bytes = 0;           // GPU live bytes (blocks and physical memory on devices)
    std::optional<int64_t> peak_t;     // empty when no GPU memory was ever live
    size_t peak_events = 0;            // events (in file order) applied when the peak was first reached
    uint64_t live_bytes_at_exit = 0;   // GPU live bytes
    uint64_t live_blocks_at_exit = 0;  // GPU blocks (physical handles: virt.physical_handles)
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
    uint64_t warmup_retention = 0;  // capture boundaries (capture, phase) with retained memory
    uint64_t hazards() const { return unsafe_calls + frees_while_graph_alive + warmup_retention; }
    // minor 2
    std::array<uint64_t, kTriggerCount> collections{};      // by GcTrigger
    std::array<int64_t, kTriggerCount> cuda_bytes_freed{};  // by GcTrigger: sum of the known values
    uint64_t compiles = 0;
    // minor 3
    VirtualStats virt;
    // minor 5 (allocator mode): tensor blocks (T records), Levels::tensor_bytes
    uint64_t tensor_allocations = 0;  // T records
    uint64_t tensor_frees = 0;        // T blocks freed by the end
    uint64_t tensor_gc_frees = 0;     // of those, freed during a garbage collection (t gc 1)
    uint64_t tensor_peak_bytes = 0;
    uint64_t tensor_peak_requested = 0;    // requested bytes of the blocks live at that peak
    std::optional<int64_t> tensor_peak_t;  // empty when no tensor block was ever live
    size_t tensor_peak_events = 0;         // events applied when the tensor peak was first reached
    uint64_t tensor_live_bytes_at_exit = 0;
    uint64_t tensor_live_blocks_at_exit = 0;
    uint64_t tensor_oom_events = 0;  // O records
};

Summary summarize(const Report& r);

struct TimePoint {
    enum Type { Peak, Exit, Time } type = Peak;
    int64_t t = 0;  // for Time: nanoseconds since the clock origin
};

struct LiveSet {
    size_t events_applied = 0;    // prefix of Report::events replayed
    int64_t t = 0;                // the time the set stands for (peak time, end time, or the requested time)
    std::vector<size_t> blocks;   // indices into Report::blocks, in allocation order
    std::vector<size_t> handles;  // indices into Report::handles whose physical memory exists, in N order
    std::vector<size_t> tensors;  // indices into Report::tensors (minor 5), in T order
};

/// The blocks and physical handles live at a point in time (every kind; filter with the kind of each
/// block and handle_matches). `known`: summarize(r), when the caller has it (`Peak` needs it;
/// without it, it is computed: a replay of every event).
LiveSet live_at(const Report& r, const TimePoint& at, const Summary* known = nullptr);

/// As live_at, but `Peak` is the peak of tensor bytes (Levels::tensor_bytes), not of GPU live bytes:
/// the moment torch.cuda.memory_allocated() was highest. `has_peak` is set false when no tensor
/// block was ever live.
LiveSet tensors_live_at(const Report& r, const TimePoint& at, bool* has_peak = nullptr, const Summary* known = nullptr);

/// Gpu: device, async and managed blocks and physical memory on devices; Physical: physical memory
/// (cuMemCreate handles) only; All: everything.
enum class KindFilter { Gpu, Pinned, All, Physical };
bool kind_matches(Kind k, KindFilter filter);
bool handle_matches(const PhysicalHandle& h, KindFilter filter);

/// An allocation site: the native stack and the Python stack (minor 2; 0 when none) of the allocation.
/// Physical handles (minor 3) form sites of their own, at the stacks of their N records.
struct Site {
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    bool physical = false;  // the site's entries are physical handles, not blocks
    uint64_t bytes = 0;
    uint64_t blocks = 0;     // blocks, or handles for a physical site
    uint64_t requested = 0;  // tensor sites (minor 5): what PyTorch asked for; bytes are block sizes
};

struct SiteTable {
    uint64_t total_bytes = 0;      // blocks and handles
    uint64_t total_blocks = 0;     // blocks only
    uint64_t total_handles = 0;    // physical handles
    uint64_t total_requested = 0;  // tensor tables: requested bytes
    std::vector<Site> sites;       // by bytes, then blocks, descending; then block sites first, by stack id,
                                   // then Python stack id
};

/// Live blocks and handles of the selected kinds grouped by allocation site (native stack id, Python
/// stack id; blocks and handles apart).
SiteTable group_by_site(const Report& r, const LiveSet& live, KindFilter filter);

/// The live blocks of one owner: ordinary memory, or the private pool of one stream capture.
struct Pool {
    uint32_t capture_id = 0;  // 0: ordinary memory (blocks owned by no capture)
    SiteTable table;
};

/// Live blocks and handles of the selected kinds split by owner (capture_id), each grouped by site:
/// ordinary memory first, then the capture pools by capture id. Only owners with live blocks.
std::vector<Pool> group_by_pool(const Report& r, const LiveSet& live, KindFilter filter);

/// The live tensor blocks (LiveSet::tensors) grouped by the site of their T record; total_blocks
/// counts them. Sorted as group_by_site.
SiteTable group_tensors_by_site(const Report& r, const LiveSet& live);
/// The live tensor blocks split by the capture whose private pool they came from (capture_id of T).
std::vector<Pool> group_tensors_by_pool(const Report& r, const LiveSet& live);

}  // namespace memguard::report

// Memory over time: the GPU figures of docs/report-format.md ("Derived figures"), or allocator
// mode's tensor bytes, after every prefix of Report::events, and the figures of phases and marks
// (format minor 4) derived from them. Used by `memguard diff` (on a report load_report read), `merge`,
// `plot` and `export`; `phases` and a streamed `diff` get the same figures from report/stream_phases.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/report.h"

namespace memguard::report {

/// Which bytes a reader of a Timeline follows: GPU live bytes, or (allocator mode, minor 5) the
/// tensor blocks' bytes, what torch.cuda.memory_allocated() reports.
enum class Series { Gpu, Tensors };

/// The JSON word for a series ("bytes_of"): "gpu" or "tensors".
inline const char* series_name(Series s) { return s == Series::Tensors ? "tensors" : "gpu"; }

/// The memory state after a prefix of Report::events.
struct LevelPoint {
    int64_t t = 0;          // the time of the last event of the prefix (0 for the empty prefix)
    uint64_t live = 0;      // GPU live bytes
    uint64_t mapped = 0;    // bytes mapped through the driver's virtual memory calls (minor 3)
    uint64_t reserved = 0;  // virtual address space reserved through the driver (minor 3)
    uint64_t tensor = 0;    // allocator mode (minor 5): tensor bytes
};

/// points[k] is the state after the first k events; points.size() == events.size() + 1.
struct Timeline {
    std::vector<LevelPoint> points;
    bool has_vmm = false;      // some V, N or Q record took part: mapped and reserved are meaningful
    bool has_tensors = false;  // some T record took part: tensor is meaningful

    /// The bytes of `series` at points[k].
    uint64_t level(size_t k, Series series) const {
        return series == Series::Tensors ? points[k].tensor : points[k].live;
    }
    /// The largest bytes of `series` over points[from..to] (inclusive), and the first index reaching it.
    std::pair<uint64_t, size_t> max_level(size_t from, size_t to, Series series) const;

    // Maxima of blocks of kBlock points, per series, so that a range maximum costs
    // O(n / kBlock + kBlock).
    static constexpr size_t kBlock = 1024;
    std::vector<uint64_t> block_max;         // of live
    std::vector<uint64_t> tensor_block_max;  // of tensor (empty without tensors)
};

Timeline build_timeline(const Report& r);

struct PhaseStats {
    size_t index = 0;                // into Report::phases
    int depth = 0;                   // open phases of the same thread (same source family) at its begin
    std::optional<uint32_t> parent;  // the innermost of those
    uint32_t occurrence = 0;         // earlier phases with the same name (0 for the first)
    uint64_t entry_bytes = 0;        // bytes (of the series asked for) right before B
    uint64_t peak_bytes = 0;         // max of live bytes from B to b, inclusive
    int64_t peak_t = 0;
    size_t peak_events = 0;   // the prefix of events at the peak
    uint64_t exit_bytes = 0;  // at b (at the end of the report when never ended)
    int64_t t_end = 0;        // of b, else the end of the report
    uint64_t incremental_peak() const { return peak_bytes - entry_bytes; }
};

/// One entry per phase, in order of B records.
std::vector<PhaseStats> phase_stats(const Report& r, const Timeline& tl, Series series = Series::Gpu);

/// Live bytes (the timeline's series) at a mark.
uint64_t live_at_mark(const Mark& m, const Timeline& tl, Series series = Series::Gpu);

}  // namespace memguard::report

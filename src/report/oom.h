// Out-of-memory events explained (`memguard oom`, docs/oom.md): each OOM a report records (x
// records of format minor 8; allocator mode's O and E records with error 2 of older reports), the
// figures around it (the request, the device, PyTorch's allocator and its fragmentation, the phase
// and step, recent collections) and a verdict of one to three sentences built from them by explicit
// rules. Failed CUDA allocations that PyTorch recovered from (it freed its cache and retried) are
// told apart. The figures and the verdict are computed apart from the categories (breakdown_at).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/categories.h"
#include "report/levels.h"
#include "report/report.h"

namespace memguard::report {

/// How long after a failed CUDA allocation PyTorch's retry (after freeing its cache) or its OOM
/// observer is looked for on the same thread.
constexpr int64_t kRetryWindowNs = 1000000000;
/// How far back `memguard oom` lists garbage collections before an OOM.
constexpr int64_t kRecentCollectionsNs = 10000000000;

/// One out-of-memory (or a recovered CUDA failure) and the records that tell of it.
struct OomEvent {
    OomSource source = OomSource::Torch;
    bool recovered = false;             // a CUDA failure followed by the allocation succeeding
    std::optional<size_t> context;      // Report::oom_contexts (its x)
    std::optional<size_t> failure;      // Report::failures (its E: a cuda x's, or an older report's)
    std::optional<size_t> tensor_oom;   // Report::tensor_ooms (its O: an allocator x's, or an older report's)
    std::vector<size_t> cuda_failures;  // Report::failures: failed CUDA calls on its thread just before it
    int64_t t = 0;
    uint64_t tid = 0;
    int device = 0;
    std::optional<uint64_t> requested;
    uint64_t rounded = 0;
    std::optional<uint64_t> stream;
    uint32_t stack_id = 0, python_stack_id = 0;
    size_t events_before = 0;  // the point of the report it stands for: after this prefix of events
    uint64_t request() const { return requested ? *requested : rounded; }
};

/// How many records of one thread are looked at around a time, at most: a report with very many
/// failures or blocks in the same instant costs bounded time per OOM.
constexpr size_t kOomScanLimit = 256;

/// What find_ooms reads of the events and blocks of a report: load_report's answer from
/// Report::events and Report::blocks; the streaming reader's from what it kept while reading
/// (report/stream_oom.h).
class OomLookups {
public:
    virtual ~OomLookups() = default;
    /// The events before the first event later than `t` (events_at_time).
    virtual size_t events_at(int64_t t) const = 0;
    /// The GPU blocks of thread `tid` allocated in [from, to], by time then record order, at most
    /// kOomScanLimit: each its (device, size).
    virtual std::vector<std::pair<int, uint64_t>> gpu_blocks(uint64_t tid, int64_t from, int64_t to) const = 0;
};

/// The OOMs and recovered CUDA failures of a report, by time (docs/oom.md says how they are found).
std::vector<OomEvent> find_ooms(const Report& r);
/// The same over `lookups` for the events and blocks (`r`'s other records as they are).
std::vector<OomEvent> find_ooms(const Report& r, const OomLookups& lookups);

/// The events before the first event later than `t` (the state "at time t").
size_t events_at_time(const Report& r, int64_t t);

/// The figures around one OOM. Absent: the report does not say.
struct OomFigures {
    uint64_t request = 0;
    // the device
    std::optional<uint64_t> device_total, device_free, limit;
    uint64_t this_process = 0;       // memguard's GPU live bytes on the device then
    std::optional<uint64_t> others;  // total - free - this process, clamped at 0
    // the caching allocator (PyTorch's, or memguard's in allocator mode)
    std::optional<uint64_t> allocated, reserved, cached_free;
    std::optional<uint64_t> largest_free;   // the largest free block of the cache
    std::string largest_free_from;          // "snapshot" (d records) or "segments" (allocator mode)
    std::optional<uint64_t> fragmentation;  // cached free bytes in blocks smaller than the request
    // the context
    std::vector<size_t> open_phases;  // Report::phases open then, in order of begin
    std::optional<uint32_t> step;     // the step in progress (steps completed + 1)
    std::vector<size_t> collections;  // Report::collections in the kRecentCollectionsNs before
    bool compile_pending = false;
    bool capturing = false;
    /// Activation tags of the moment (tensors saved by autograd graphs), by label, largest first.
    std::vector<std::pair<std::string, uint64_t>> saved;
};

OomFigures oom_figures(const Report& r, const OomEvent& e);

/// What the figures read of the live set at an OOM's point: the GPU bytes live on its device, and
/// the free gaps of allocator mode's segments there (below).
struct OomPoint {
    uint64_t this_process = 0;
    std::vector<uint64_t> segment_gaps;
};
/// The point `walk` (over `r`) is at, for `device`.
OomPoint oom_point(const Report& r, const LevelWalk& walk, int device);
/// oom_figures with the live set's part given (`r`'s other records as they are: a streamed report).
OomFigures oom_figures(const Report& r, const OomEvent& e, const OomPoint& at);

/// The cached free bytes that cannot serve a request: the free blocks smaller than it (`free_blocks`
/// known), else all of `cached_free` when `largest_free` < request, else 0.
uint64_t fragmentation_of(uint64_t request, uint64_t cached_free, std::optional<uint64_t> largest_free,
                          const std::vector<uint64_t>* free_blocks);

/// The words for a category in a sentence ("activations and tensors saved for backward").
std::string category_phrase(Category c, const std::string& detail);

/// The verdict: one to three sentences (docs/oom.md, "The verdict"). `top_site` names the largest
/// site of the largest category ("" when none).
std::vector<std::string> oom_verdict(const OomFigures& f, const Breakdown& b, const std::string& top_site);

}  // namespace memguard::report

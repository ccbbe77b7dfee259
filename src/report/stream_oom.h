// The streaming reader's observers for out-of-memory records and collections (docs/architecture.md,
// "The streaming reader"): what `memguard oom`, `summary` and `cycles` read of the blocks and
// events, kept while a report streams, so that find_ooms, oom_figures, breakdown_at and the
// collections' freed tensors give on a streamed report what they give on the whole one.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "report/analysis.h"
#include "report/levels.h"
#include "report/oom.h"
#include "report/report.h"
#include "report/stream.h"

namespace memguard::report {

/// Watches the failure records (E with error 2, O, x) as they are read and keeps what find_ooms and
/// the figures of each OOM read of the rest of the report:
/// - the point of each (x: the events before it; O and E: before the first event later than its
///   time), told forward: a point that lies behind the record (a report written out of time order)
///   is not known;
/// - for each E and each x of a CUDA failure, the first kOomScanLimit GPU blocks of its thread
///   allocated within kRetryWindowNs after it (whether PyTorch recovered); a window that a block
///   read before the record could fall in is not known;
/// - with `points`, at each point the GPU bytes of its device, the free gaps of the segments and a
///   copy of the live set (PointSnapshot), dropped as soon as a CUDA failure is seen recovered.
/// Memory: per failure record its window (at most kOomScanLimit blocks) and, until recovered, a copy
/// of the live set at it (records at one point share it): bounded by the live set times the OOMs
/// that are not recovered, plus the last copy taken (a report holds few OOMs: each ends a step or
/// the run).
class OomObserver : public EventObserver {
public:
    explicit OomObserver(bool points) : points_(points) {}
    bool on_event(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    /// A fold holds the points told, the records waiting for theirs, the retry windows and, with
    /// `points`, the live sets kept (an observer without `points` takes the rest of such a fold).
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;

    /// find_ooms of the report read, as on the whole report; nullopt when what it read was not kept
    /// exactly (then load_report answers). With `points`, also nullopt when an OOM that is not
    /// recovered has no point kept.
    std::optional<std::vector<OomEvent>> ooms(const Report& r) const;
    /// oom_figures of `e` (an answer of ooms(), not recovered).
    OomFigures figures(const Report& r, const OomEvent& e) const;
    /// The report of `e`'s point (PointSnapshot::into over a copy of `r`), on which breakdown_at
    /// after all its events reads as at the point of the whole report (positions aside: steps and
    /// moments need load_report).
    Report point_report(const Report& r, const OomEvent& e) const;
    /// As point_report, with the live set of the point's report in `live`, and the time of the point's
    /// last event in `last_t` (0 for none): what PointBreakdowns::at reads, with e.events_before, for
    /// a report whose steps or moments the categories read.
    Report point_report(const Report& r, const OomEvent& e, LiveSet& live, int64_t& last_t) const;
    /// The copies of a live set kept now (tests: the memory bound).
    size_t live_sets_kept() const;

private:
    struct Point {
        bool known = false;   // taken (else dropped, or behind the record)
        size_t position = 0;  // the events applied there
        OomPoint at;
        std::shared_ptr<const PointSnapshot> live;
    };
    /// A record waiting for its point (the first event later than its time).
    struct Waiting {
        bool tensor_oom = false;  // O, else E
        size_t index = 0;
    };
    /// The GPU blocks of one thread within kRetryWindowNs after a failure.
    struct Window {
        uint64_t tid = 0;
        int64_t from = 0, to = 0;
        bool complete = true;  // no block read before it could fall in it
        struct Block {
            int64_t t;
            size_t order;
            int device;
            uint64_t size;
            bool operator<(const Block& o) const { return t != o.t ? t < o.t : order < o.order; }
        };
        std::vector<Block> first;  // a max-heap of the kOomScanLimit earliest
        /// The records it tells of: (index, whether an x (Report::oom_contexts), else an E).
        std::vector<std::pair<size_t, bool>> owners;
    };
    class Lookups;

    void catch_up(const Report& r);
    Point take_point(const Report& r, int device);
    /// Takes the points of the records waiting for an event later than `*later` (all: nullptr).
    void resolve(const Report& r, const int64_t* later);
    Window& window(uint64_t tid, int64_t from);
    void drop_if_recovered(const Report& r, Window& w);
    bool recovers(const Report& r, const std::pair<size_t, bool>& owner, const Window::Block& b) const;
    const Point* point_of(const OomEvent& e) const;

    bool points_;
    std::optional<LevelWalk> walk_;  // with points only
    size_t applied_ = 0;             // events read
    int64_t max_t_ = INT64_MIN;      // the latest time of the events applied
    int64_t last_t_ = 0;
    size_t failures_ = 0, tensor_ooms_ = 0, contexts_ = 0;  // records looked at
    std::unordered_map<uint64_t, int64_t> latest_alloc_;    // tid -> the latest GPU block read
    std::multimap<int64_t, Waiting> waiting_;               // by time
    std::map<int64_t, size_t> events_at_;                   // the points told
    std::vector<Point> failure_points_, tensor_oom_points_, context_points_;
    std::vector<Window> windows_;
    std::map<std::pair<uint64_t, int64_t>, size_t> window_of_;             // (tid, from) -> windows_
    std::unordered_map<uint64_t, std::multimap<int64_t, size_t>> by_tid_;  // tid -> from -> windows_
    // The thread of the last GPU block read, its entries above (most reports allocate on one thread
    // most of the time: no hashing per event); cleared when a window is added.
    uint64_t cached_tid_ = 0;
    int64_t* cached_latest_ = nullptr;
    std::multimap<int64_t, size_t>* cached_windows_ = nullptr;
    size_t snapshot_at_ = SIZE_MAX;  // the last copy's position
    std::shared_ptr<const PointSnapshot> snapshot_;
};

/// The tensor blocks freed during each collection (allocator mode: t records with gc 1 on its
/// thread, before its Y), by the site of their T record: what `memguard cycles` lists.
struct CollectionFrees {
    /// Per collection (Report::collections), its sites by (stack id, Python stack id).
    std::vector<std::map<std::pair<uint32_t, uint32_t>, Site>> by_site;
    /// Tensor blocks freed with the gc flag and no Y after them on their thread.
    uint64_t unattributed = 0;
};

/// CollectionFrees of a whole report (load_report's: Tensor::collection).
CollectionFrees collection_frees(const Report& r);

/// CollectionFrees folded while streaming (a streamed report keeps no freed tensor): the frees of
/// each thread since its last Y, by site, until the next Y of that thread is read. Memory: the
/// threads times the sites freed in one collection, and the collections times their sites.
class CollectionFreesObserver : public EventObserver {
public:
    bool on_event(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    /// A fold holds each collection's sites and the frees waiting for their thread's Y.
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;
    CollectionFrees take() { return std::move(out_); }

private:
    void catch_up(const Report& r);
    size_t seen_ = 0;  // collections looked at
    std::unordered_map<uint64_t, std::map<std::pair<uint32_t, uint32_t>, Site>> pending_;
    CollectionFrees out_;
};

}  // namespace memguard::report

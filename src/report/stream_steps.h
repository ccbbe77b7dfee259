// `memguard steps` and the per-rank summary's steps through the streaming reader (report/stream.h,
// docs/architecture.md, "The streaming reader"): the step rows fold in one pass (StepRowsObserver);
// the categories at each step's peak, the site tables at the ends of a growth and what became of
// the growth's blocks need points known only after the rows: a second pass (StepPointsObserver)
// takes them all. Both keep what is live (blocks, tensors, sites) and one row per step, never an
// event, and give what step_rows, breakdowns_at, live_after and growth_fate give on the whole report.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "report/categories.h"
#include "report/levels.h"
#include "report/steps.h"
#include "report/stream.h"

namespace memguard::report {

/// The step rows of both series (GPU bytes and tensor bytes), folded event by event: rows(series) is
/// step_rows(r, build_timeline(r), series) of the report read whole.
class StepRowsObserver : public EventObserver {
public:
    bool on_event(const Report& r, const Event& e) override;
    bool share_walk(const LevelWalk& walk) override { return walk_.share(walk); }
    void before(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    /// A fold holds the rows of the steps ended and the open step's figures so far.
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;
    /// The rows of `series`, one per s record; after the read.
    const std::vector<StepRow>& rows(Series series) const { return series == Series::Tensors ? tensor_ : gpu_; }
    /// The step not ended yet: where its peak of `series` stands so far (a position, as
    /// StepRow::peak_events), and the time of the event that reached it.
    size_t open_peak(Series series) const { return ranges_[series == Series::Tensors ? 1 : 0].best_at; }
    int64_t open_peak_t(Series series) const { return ranges_[series == Series::Tensors ? 1 : 0].best_t; }

private:
    struct Range {
        uint64_t entry = 0, best = 0;
        size_t best_at = 0;
        int64_t best_t = 0;
    };
    void close_steps(const Report& r);
    uint64_t level(Series s) const;
    WalkRef walk_;
    size_t next_step_ = 0, begin_ = 0;
    int64_t t_begin_ = 0, last_t_ = 0;
    Range ranges_[2];  // Gpu, Tensors
    std::vector<StepRow> gpu_, tensor_;
};

/// What a second pass takes at the points of `memguard steps`.
struct StepPointsPlan {
    std::vector<size_t> points;  // positions (prefixes of events as load_report counts them): breakdowns
    Series series = Series::Gpu;
    /// The growth's ends (positions, and the times of the s records) and the last step's; empty: none.
    std::optional<Growth> growth;
    size_t from = 0, to = 0;
    int64_t begin_t = 0, end_t = 0, last_end_t = 0;
    std::optional<int64_t> full_t;  // estimated: the last full collection after begin_t
};

/// The plan of `points` (breakdowns) in `series`, with the ends of `growth` (found over `rows`) when
/// there is one; `r`: the first pass's report (its collections).
StepPointsPlan plan_points(const Report& r, const std::vector<StepRow>& rows, const std::optional<Growth>& growth,
                           Series series, std::vector<size_t> points);

/// The second pass: at each point of the plan, the breakdown (PointBreakdowns over the first pass's
/// report); at the growth's ends, the site tables; and the items growth_fate reads (GrowthItems),
/// tracked to the end of the report.
class StepPointsObserver : public EventObserver {
public:
    StepPointsObserver(StepPointsPlan plan, PointBreakdowns& breakdowns);
    bool on_event(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    /// Takes the points of the plan before the fold's point from the figures a StepPointsFolder
    /// wrote: the breakdowns, the site tables, and for a growth whose first step end is folded, the
    /// tensor blocks live there (by order). A growth whose last step end is folded too: growth_folded()
    /// (the blocks it added are not in the fold). Throws BadFold when a point of the plan is not in
    /// the fold.
    void fold_in(const Report& r, const Fold& f) override;

    /// The breakdown at a point of the plan.
    const Breakdown& at(size_t point) const { return breakdowns_.at(point); }
    /// The site tables at the growth's first and last step end (as steps' analyse makes them).
    const SiteTable& from_table() const { return from_table_; }
    const SiteTable& to_table() const { return to_table_; }
    /// growth_fate's items; call once, after the read.
    GrowthItems take_items();
    /// The plan's growth ends at or before the point of a fold the read took (its last step end is in
    /// the folded detail): growth_fate cannot be told what became of it (GrowthFate::folded).
    bool growth_folded() const { return growth_folded_; }

private:
    void take_points(const Report& r);
    void assign_collections(const Report& r);
    LiveSet live_now(const Report& r) const;

    StepPointsPlan plan_;
    PointBreakdowns& pb_;
    std::optional<LevelWalk> walk_;
    size_t next_point_ = 0;
    int64_t last_t_ = 0;
    std::map<size_t, Breakdown> breakdowns_;
    SiteTable from_table_, to_table_;
    // Exact: tensor blocks live at `from` (by order; a folded `from`: those before the order
    // `from_tensors_`); those added, tracked by slot until freed; gc frees waiting, per thread, for
    // their collection's Y.
    std::unordered_set<size_t> live_from_;
    size_t from_tensors_ = 0;
    bool growth_folded_ = false;
    std::unordered_map<size_t, size_t> tracked_;  // slot -> index into items_.added
    std::map<uint64_t, std::vector<size_t>> gc_pending_;
    size_t collections_seen_ = 0;
    // Estimated: candidate blocks by Block::order (the copy as of their last event).
    std::map<size_t, Block> candidates_;
    GrowthItems items_;
};

struct FoldCarried;

/// A step end as a fold holds it (StepPointsFolder): the A and T records read there (the orders
/// of the next), what the blocks and tensor blocks live there that were freed before the fold was
/// written allocated last (T: the highest order, plus one; A: the latest time of the GPU blocks),
/// and the site tables of both series there.
struct FoldedStepEnd {
    size_t tensors = 0, blocks = 0;
    size_t tensor_freed = 0;
    int64_t block_freed_t = INT64_MIN;
    SiteTable gpu, tensor;
};

/// The folder's side of StepPointsObserver (report/fold.h; docs/bounded-reports.md, "The folded
/// figures"): a fold stands before the steps' second pass knows its plan, so it holds what that pass
/// could ask of the stretch it covers: the breakdown (categories, as `steps` asks for them: no sites)
/// at each step's peak in both series and at each step end that may still be a growth's first or
/// last (growth_candidates, in either series), with the site tables of both series and the tensor
/// blocks read (Tensor::order) at those ends; and the same for the peaks the step not
/// ended yet has reached. The live set at a peak, known only once the step ends, is rolled back from
/// the live set at the step's end through the changes since the peak (kept while the step runs). A
/// breakdown is worked out when the fold is written (the tags of moments up to it count), or earlier
/// when the live sets waiting pass kHeldItems; in interposition mode a point whose moment a later
/// one could still be (moment_settled) waits, and the fold holds its live set: the newest
/// kUnsettledKept such points, so that a fold stays small in a run with few or no moments (a point
/// not kept is worked out with the moments known: exact unless a moment more than that many points
/// later was to decide it; docs/bounded-reports.md, "What a fold does not keep").
class StepPointsFolder : public EventObserver {
public:
    static constexpr size_t kHeldItems = size_t{1} << 20;
    static constexpr size_t kUnsettledKept = 6;
    /// `rows` and `tags`: observers of the same read, told of each event before this one.
    StepPointsFolder(const StepRowsObserver& rows, const TensorTagObserver& tags, BreakdownOptions options);
    ~StepPointsFolder() override;
    bool share_walk(const LevelWalk& walk) override { return walk_.share(walk); }
    void before(const Report& r, const Event& e) override;
    bool on_event(const Report& r, const Event& e) override;
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;

    /// The breakdown at `position` once worked out (tests), or null.
    const Breakdown* at(size_t position) const;

private:
    struct Change;
    struct Point;
    void close_steps(const Report& r);
    /// The point at `p` (kept, or taken now: the live set rolled back to it), whose last event was at `t`.
    void keep_point(const Report& r, size_t p, int64_t t);
    PointSnapshot live_at(const Report& r, size_t p, int64_t t) const;
    /// Works out the breakdowns of the points whose live set is kept (`all`: those of interposition
    /// mode whose moment is not settled too; else all but the newest `unsettled_kept` of those).
    void work_out(const Report& r, bool all, size_t unsettled_kept = SIZE_MAX);

    const StepRowsObserver& rows_;
    const TensorTagObserver& tags_;
    BreakdownOptions options_;
    WalkRef walk_;
    size_t rows_seen_ = 0;
    int64_t last_t_ = 0;
    size_t tensors_read_ = 0;                           // the T records read (the order of the next one)
    size_t blocks_read_ = 0;                            // the A records read
    std::array<std::pair<size_t, int64_t>, 2> best_{};  // the open step's peak per series, after the last event
    std::deque<Change> log_;                            // the live set's changes since the earliest open peak
    size_t held_ = 0;                                   // items in the live sets kept
    std::map<size_t, Point> points_;
    std::map<size_t, FoldedStepEnd> ends_;
    // Before the event being told: the liveness of the item it names.
    bool was_live_ = false;
    std::optional<size_t> handle_;
    // Went on from a fold: where it stood, and the tensor blocks live there (their tags then).
    size_t folded_at_ = 0;
    std::unique_ptr<FoldCarried> carried_;
};

}  // namespace memguard::report

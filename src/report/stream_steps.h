// `memguard steps` and the per-rank summary's steps through the streaming reader (report/stream.h,
// docs/architecture.md, "The streaming reader"): the step rows fold in one pass (StepRowsObserver);
// the categories at each step's peak, the site tables at the ends of a growth and what became of
// the growth's blocks need points known only after the rows: a second pass (StepPointsObserver)
// takes them all. Both keep what is live (blocks, tensors, sites) and one row per step, never an
// event, and give what step_rows, breakdowns_at, live_after and growth_fate give on the whole report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
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
    void on_end(const Report& r) override;
    /// The rows of `series`, one per s record; after the read.
    const std::vector<StepRow>& rows(Series series) const { return series == Series::Tensors ? tensor_ : gpu_; }

private:
    struct Range {
        uint64_t entry = 0, best = 0;
        size_t best_at = 0;
        int64_t best_t = 0;
    };
    void close_steps(const Report& r);
    uint64_t level(Series s) const;
    std::optional<LevelWalk> walk_;
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

    /// The breakdown at a point of the plan.
    const Breakdown& at(size_t point) const { return breakdowns_.at(point); }
    /// The site tables at the growth's first and last step end (as steps' analyse makes them).
    const SiteTable& from_table() const { return from_table_; }
    const SiteTable& to_table() const { return to_table_; }
    /// growth_fate's items; call once, after the read.
    GrowthItems take_items();

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
    // Exact: tensor blocks live at `from` (by order); those added, tracked by slot until freed; gc
    // frees waiting, per thread, for their collection's Y.
    std::unordered_set<size_t> live_from_;
    std::unordered_map<size_t, size_t> tracked_;  // slot -> index into items_.added
    std::map<uint64_t, std::vector<size_t>> gc_pending_;
    size_t collections_seen_ = 0;
    // Estimated: candidate blocks by Block::order (the copy as of their last event).
    std::map<size_t, Block> candidates_;
    GrowthItems items_;
};

}  // namespace memguard::report

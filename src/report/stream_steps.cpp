// The step rows and the points of `memguard steps` through the streaming reader (report/stream_steps.h).
#include "report/stream_steps.h"

#include <algorithm>
#include <utility>

#include "report/saturate.h"

namespace memguard::report {

uint64_t StepRowsObserver::level(Series s) const {
    const Levels& l = walk_->levels();
    return s == Series::Tensors ? l.tensor_bytes : l.gpu_bytes;
}

/// The s records read since the last event: each ends a step at the current position (as step_rows
/// measures it over the timeline: entry at the previous end, the first maximum from there to here).
void StepRowsObserver::close_steps(const Report& r) {
    for (; next_step_ < r.steps.size(); ++next_step_) {
        const Step& s = r.steps[next_step_];
        const size_t here = walk_->applied();
        for (Series series : {Series::Gpu, Series::Tensors}) {
            Range& range = ranges_[series == Series::Tensors ? 1 : 0];
            StepRow row;
            row.index = next_step_;
            row.events_begin = std::min(begin_, s.events_before);
            row.events_end = std::min(s.events_before, here);
            row.t_begin = std::min(t_begin_, s.t);
            row.t_end = s.t;
            row.entry_bytes = range.entry;
            row.peak_bytes = range.best;
            row.peak_events = range.best_at;
            row.peak_t = std::max(row.t_begin, range.best_t);
            row.exit_bytes = level(series);
            (series == Series::Tensors ? tensor_ : gpu_).push_back(row);
            // The next step begins here: its entry and its first maximum so far.
            range.entry = range.best = row.exit_bytes;
            range.best_at = here;
            range.best_t = last_t_;
        }
        begin_ = s.events_before;
        t_begin_ = s.t;
    }
}

bool StepRowsObserver::on_event(const Report& r, const Event& e) {
    if (!walk_) walk_.emplace(r);
    close_steps(r);
    walk_->apply(e);
    last_t_ = e.t;
    for (Series series : {Series::Gpu, Series::Tensors}) {
        Range& range = ranges_[series == Series::Tensors ? 1 : 0];
        const uint64_t now = level(series);
        if (now > range.best) {
            range.best = now;
            range.best_at = walk_->applied();
            range.best_t = e.t;
        }
    }
    return true;
}

void StepRowsObserver::on_end(const Report& r) {
    if (!walk_) walk_.emplace(r);
    close_steps(r);
}

StepPointsPlan plan_points(const Report& r, const std::vector<StepRow>& rows, const std::optional<Growth>& growth,
                           Series series, std::vector<size_t> points) {
    StepPointsPlan plan;
    plan.points = std::move(points);
    plan.series = series;
    if (!growth || growth->last >= rows.size()) return plan;
    plan.growth = growth;
    plan.from = rows[growth->first].events_end;
    plan.to = rows[growth->last].events_end;
    plan.begin_t = rows[growth->first].t_end;
    plan.end_t = rows[growth->last].t_end;
    plan.last_end_t = rows.back().t_end;
    // As growth_fate's estimate finds it: the last full collection (by time) that ended after begin_t.
    for (const Collection& c : r.collections) {
        if (c.generation >= 2 && c.t > plan.begin_t && (!plan.full_t || c.t > *plan.full_t)) plan.full_t = c.t;
    }
    return plan;
}

StepPointsObserver::StepPointsObserver(StepPointsPlan plan, PointBreakdowns& breakdowns)
    : plan_(std::move(plan)), pb_(breakdowns) {
    if (plan_.growth) {
        plan_.points.push_back(plan_.from);
        plan_.points.push_back(plan_.to);
    }
    std::sort(plan_.points.begin(), plan_.points.end());
    plan_.points.erase(std::unique(plan_.points.begin(), plan_.points.end()), plan_.points.end());
}

LiveSet StepPointsObserver::live_now(const Report& r) const {
    LiveSet live;
    live.events_applied = walk_->applied();
    live.t = last_t_;
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (walk_->block_live(i)) live.blocks.push_back(i);
    }
    for (size_t i = 0; i < r.handles.size(); ++i) {
        if (walk_->handle_live(i)) live.handles.push_back(i);
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (walk_->tensor_live(i)) live.tensors.push_back(i);
    }
    return live;
}

void StepPointsObserver::take_points(const Report& r) {
    const size_t here = walk_->applied();
    const bool exact = plan_.series == Series::Tensors;
    while (next_point_ < plan_.points.size() && plan_.points[next_point_] <= here) {
        const size_t p = plan_.points[next_point_++];
        const LiveSet live = live_now(r);
        breakdowns_.emplace(p, pb_.at(r, live, here, here == 0 ? 0 : last_t_));
        if (!plan_.growth || (p != plan_.from && p != plan_.to)) continue;
        const SiteTable table = exact ? group_tensors_by_site(r, live) : group_by_site(r, live, KindFilter::Gpu);
        if (p == plan_.from) {
            from_table_ = table;
            if (exact) {
                for (size_t i : live.tensors) {
                    const Tensor& x = r.tensors[i];
                    live_from_.insert(x.order);
                    add_to(items_.site_bytes[{x.stack_id, x.python_stack_id}].first, x.size);
                }
            }
        }
        if (p == plan_.to) {
            to_table_ = table;
            if (exact) {
                for (size_t i : live.tensors) {
                    const Tensor& x = r.tensors[i];
                    add_to(items_.site_bytes[{x.stack_id, x.python_stack_id}].second, x.size);
                    if (live_from_.count(x.order) != 0) continue;
                    tracked_[i] = items_.added.size();
                    items_.added.push_back(GrowthItems::Added{x, SIZE_MAX});
                }
                live_from_.clear();
            }
        }
    }
}

/// As the parser gives a gc free its collection: the next Y of the freeing thread.
void StepPointsObserver::assign_collections(const Report& r) {
    for (; collections_seen_ < r.collections.size(); ++collections_seen_) {
        auto it = gc_pending_.find(r.collections[collections_seen_].tid);
        if (it == gc_pending_.end()) continue;
        for (size_t i : it->second) items_.added[i].tensor.collection = collections_seen_;
        gc_pending_.erase(it);
    }
}

bool StepPointsObserver::on_event(const Report& r, const Event& e) {
    if (!walk_) walk_.emplace(r);
    assign_collections(r);
    take_points(r);
    const size_t position = walk_->applied();
    walk_->apply(e);
    last_t_ = e.t;
    if (!plan_.growth) return next_point_ < plan_.points.size();
    if (plan_.series == Series::Tensors) {
        if (e.type == Event::TensorFree) {
            auto it = tracked_.find(e.block);
            if (it != tracked_.end()) {
                GrowthItems::Added& a = items_.added[it->second];
                a.tensor = r.tensors[e.block];
                a.free_at = position;
                if (a.tensor.freed_in_gc) gc_pending_[a.tensor.free_tid].push_back(it->second);
                tracked_.erase(it);
            }
        }
        return true;
    }
    // Estimated: the GPU blocks growth_fate may look at (allocated after the growth began, and
    // before its end or the last full collection), kept while live and after a free that came late.
    if (e.type != Event::Alloc && e.type != Event::Free && e.type != Event::Restore) return true;
    const Block& b = r.blocks[e.block];
    const bool allocated_in = is_gpu(b.kind) && b.t_alloc > plan_.begin_t &&
                              (b.t_alloc <= plan_.end_t || (plan_.full_t && b.t_alloc < *plan_.full_t));
    if (!allocated_in) return true;
    if (e.type == Event::Free && b.t_free) {
        const int64_t f = *b.t_free;
        const bool kept = (b.t_alloc <= plan_.end_t && f > plan_.end_t) ||
                          (plan_.full_t && b.t_alloc < *plan_.full_t && f > plan_.last_end_t);
        if (!kept) {
            candidates_.erase(b.order);
            return true;
        }
    }
    candidates_[b.order] = b;
    return true;
}

void StepPointsObserver::on_end(const Report& r) {
    if (!walk_) walk_.emplace(r);
    assign_collections(r);
    take_points(r);
}

GrowthItems StepPointsObserver::take_items() {
    // In order of T (A) records, as growth_items gathers them from the whole report.
    std::stable_sort(items_.added.begin(), items_.added.end(),
                     [](const GrowthItems::Added& a, const GrowthItems::Added& b) {
                         return a.tensor.order < b.tensor.order;
                     });
    for (auto& [order, b] : candidates_) items_.blocks.push_back(std::move(b));
    candidates_.clear();
    return std::move(items_);
}

}  // namespace memguard::report

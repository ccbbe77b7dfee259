// The step rows and the points of `memguard steps` through the streaming reader (report/stream_steps.h).
#include "report/stream_steps.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "report/saturate.h"

namespace memguard::report {

uint64_t StepRowsObserver::level(Series s) const {
    const Levels& l = walk_.get().levels();
    return s == Series::Tensors ? l.tensor_bytes : l.gpu_bytes;
}

/// The s records read since the last event: each ends a step at the current position (as step_rows
/// measures it over the timeline: entry at the previous end, the first maximum from there to here).
void StepRowsObserver::close_steps(const Report& r) {
    for (; next_step_ < r.steps.size(); ++next_step_) {
        const Step& s = r.steps[next_step_];
        const size_t here = walk_.get().applied();
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

void StepRowsObserver::before(const Report& r, const Event& e) {
    (void)e;
    walk_.get(r);
    close_steps(r);
}

bool StepRowsObserver::on_event(const Report& r, const Event& e) {
    if (!walk_.shared()) {
        before(r, e);
        walk_.apply(r, e);
    }
    last_t_ = e.t;
    for (Series series : {Series::Gpu, Series::Tensors}) {
        Range& range = ranges_[series == Series::Tensors ? 1 : 0];
        const uint64_t now = level(series);
        if (now > range.best) {
            range.best = now;
            range.best_at = walk_.get().applied();
            range.best_t = e.t;
        }
    }
    return true;
}

void StepRowsObserver::on_end(const Report& r) {
    walk_.get(r);
    close_steps(r);
}

void StepRowsObserver::fold_out(const Report& r, FoldWriter& w) {
    (void)r;
    w.figure("steps", {fold_of(next_step_), fold_of(begin_), t_begin_, last_t_});
    for (int64_t s = 0; s < 2; ++s) {
        const Range& x = ranges_[s];
        w.figure("steps.range", {s, fold_of(x.entry), fold_of(x.best), fold_of(x.best_at), x.best_t});
        for (const StepRow& row : s == 1 ? tensor_ : gpu_) {
            w.figure("steps.row", {s, fold_of(row.index), row.t_begin, row.t_end, fold_of(row.events_begin),
                                   fold_of(row.events_end), fold_of(row.entry_bytes), fold_of(row.peak_bytes),
                                   fold_of(row.peak_events), row.peak_t, fold_of(row.exit_bytes)});
        }
    }
}

void StepRowsObserver::fold_in(const Report& r, const Fold& f) {
    walk_.get(r);
    walk_.fold_in(r, f.at.events);
    bool found = false;
    f.each("steps", [&](const Fold::Figure& x) {
        found = true;
        next_step_ = static_cast<size_t>(fold_value(x, 0));
        begin_ = static_cast<size_t>(fold_value(x, 1));
        t_begin_ = fold_value(x, 2, INT64_MIN);
        last_t_ = fold_value(x, 3, INT64_MIN);
    });
    if (!found) throw BadFold("no figure 'steps'");
    if (next_step_ > r.steps.size()) throw BadFold("steps: more steps ended than the report has");
    gpu_.clear();
    tensor_.clear();
    auto series_of = [](const Fold::Figure& x) {
        const int64_t s = fold_value(x, 0);
        if (s > 1) throw BadFold(x.name + ": no series " + std::to_string(s));
        return static_cast<size_t>(s);
    };
    f.each("steps.range", [&](const Fold::Figure& x) {
        Range& to = ranges_[series_of(x)];
        to.entry = fold_u64(x, 1);
        to.best = fold_u64(x, 2);
        to.best_at = static_cast<size_t>(fold_value(x, 3));
        to.best_t = fold_value(x, 4, INT64_MIN);
    });
    f.each("steps.row", [&](const Fold::Figure& x) {
        StepRow row;
        row.index = static_cast<size_t>(fold_value(x, 1));
        row.t_begin = fold_value(x, 2, INT64_MIN);
        row.t_end = fold_value(x, 3, INT64_MIN);
        row.events_begin = static_cast<size_t>(fold_value(x, 4));
        row.events_end = static_cast<size_t>(fold_value(x, 5));
        row.entry_bytes = fold_u64(x, 6);
        row.peak_bytes = fold_u64(x, 7);
        row.peak_events = static_cast<size_t>(fold_value(x, 8));
        row.peak_t = fold_value(x, 9, INT64_MIN);
        row.exit_bytes = fold_u64(x, 10);
        (series_of(x) == 1 ? tensor_ : gpu_).push_back(row);
    });
    if (gpu_.size() != next_step_ || tensor_.size() != next_step_) throw BadFold("steps: rows missing");
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

namespace {

/// The slots of `r` live where `w` stands.
LiveSet live_slots(const Report& r, const LevelWalk& w) {
    LiveSet live;
    live.events_applied = w.applied();
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (w.block_live(i)) live.blocks.push_back(i);
    }
    for (size_t i = 0; i < r.handles.size(); ++i) {
        if (w.handle_live(i)) live.handles.push_back(i);
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (w.tensor_live(i)) live.tensors.push_back(i);
    }
    return live;
}

}  // namespace

LiveSet StepPointsObserver::live_now(const Report& r) const {
    LiveSet live = live_slots(r, *walk_);
    live.t = last_t_;
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
                    if (live_from_.count(x.order) != 0 || x.order < from_tensors_) continue;
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
    if (r.fold_pending) {  // before a fold: only the live set there counts (fold_in)
        walk_->apply(e);
        last_t_ = e.t;
        return true;
    }
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

// --- folds ---------------------------------------------------------------------------------------

namespace memguard::report {

namespace {

// A figure holds at most this many values (a record is at most format::Line::kCapacity bytes).
constexpr size_t kValuesPerFigure = 300;

void put_text(std::vector<int64_t>& v, const std::string& s) {
    v.push_back(fold_of(s.size()));
    for (char c : s) v.push_back(static_cast<unsigned char>(c));
}

/// Reads what put_text wrote at values[i], moving i past it.
std::string text_at(const Fold::Figure& x, size_t& i) {
    const auto n = static_cast<size_t>(fold_value(x, i++));
    if (n > x.values.size()) throw BadFold(x.name + ": a text longer than its figure");
    std::string s;
    for (size_t k = 0; k < n; ++k) s.push_back(static_cast<char>(fold_value(x, i++)));
    return s;
}

/// Writes `values` (whole items of `per` values each, after a `head` repeated in each figure) as
/// figures `name` of at most kValuesPerFigure values.
class Chunked {
public:
    Chunked(FoldWriter& w, std::string name, std::vector<int64_t> head)
        : w_(w), name_(std::move(name)), head_(std::move(head)), v_(head_) {}
    ~Chunked() { flush(); }
    /// Starts an item; the values added until the next item stay in one figure.
    std::vector<int64_t>& item(size_t size) {
        if (v_.size() > head_.size() && v_.size() + size > kValuesPerFigure) flush();
        return v_;
    }
    void flush() {
        if (v_.size() > head_.size()) w_.figure(name_, v_);
        v_ = head_;
    }

private:
    FoldWriter& w_;
    std::string name_;
    std::vector<int64_t> head_, v_;
};

bool allocator_mode_of(const Report& r) {
    auto it = r.info.find("allocator");
    return r.has_tensors() || (it != r.info.end() && it->second == "memguard");
}

void write_breakdown(FoldWriter& w, size_t p, int64_t t, size_t tensors, const Breakdown& b, int64_t moment) {
    w.figure("stepfold.point", {fold_of(p), t, 0, fold_of(tensors), b.device, fold_of(b.total), moment});
    Chunked parts(w, "stepfold.parts", {fold_of(p)});
    for (const CategoryPart& part : b.parts) {
        std::vector<int64_t>& v = parts.item(6 + part.detail.size());
        v.insert(v.end(), {static_cast<int64_t>(part.category), fold_of(part.bytes), fold_of(part.blocks),
                           fold_of(part.estimated_bytes)});
        put_text(v, part.detail);
    }
}

void write_table(FoldWriter& w, size_t p, int64_t which, const SiteTable& table) {
    w.figure("stepfold.table", {fold_of(p), which, fold_of(table.total_bytes), fold_of(table.total_blocks),
                                fold_of(table.total_handles), fold_of(table.total_requested)});
    Chunked sites(w, "stepfold.sites", {fold_of(p), which});
    for (const Site& s : table.sites) {
        std::vector<int64_t>& v = sites.item(6);
        v.insert(v.end(), {s.stack_id, s.python_stack_id, s.physical ? 1 : 0, fold_of(s.bytes), fold_of(s.blocks),
                           fold_of(s.requested)});
    }
}

/// What StepPointsFolder::fold_out wrote, read back.
struct FoldedSteps {
    size_t rows = 0;
    int64_t last_t = 0;
    size_t tensors = 0, blocks = 0;
    struct Point {
        int64_t t = 0;
        size_t tensors = 0;
        int64_t moment = -1;  // the breakdown's moment: an index into Report::moments
        std::optional<Breakdown> breakdown;
        std::optional<PointSnapshot> live;
    };
    std::map<size_t, Point> points;
    using End = FoldedStepEnd;
    std::map<size_t, End> ends;
};

FoldedSteps read_folded_steps(const Report& r, const Fold& f) {
    FoldedSteps out;
    bool found = false;
    f.each("stepfold", [&](const Fold::Figure& x) {
        found = true;
        out.rows = static_cast<size_t>(fold_value(x, 0));
        out.last_t = fold_value(x, 1, INT64_MIN);
        out.tensors = static_cast<size_t>(fold_value(x, 2));
        out.blocks = static_cast<size_t>(fold_value(x, 3));
    });
    if (!found) throw BadFold("no figure 'stepfold'");
    auto point_at = [&](const Fold::Figure& x) -> FoldedSteps::Point& {
        auto it = out.points.find(static_cast<size_t>(fold_value(x, 0)));
        if (it == out.points.end()) throw BadFold(x.name + " before its point");
        return it->second;
    };
    auto end_at = [&](const Fold::Figure& x) -> FoldedSteps::End& {
        auto it = out.ends.find(static_cast<size_t>(fold_value(x, 0)));
        if (it == out.ends.end()) throw BadFold(x.name + " before its step end");
        return it->second;
    };
    auto table_of = [&](const Fold::Figure& x) -> SiteTable& {
        FoldedSteps::End& e = end_at(x);
        return fold_value(x, 1) == 0 ? e.gpu : e.tensor;
    };
    for (const Fold::Figure& x : f.figures) {
        if (x.name == "stepfold.point") {
            const auto p = static_cast<size_t>(fold_value(x, 0));
            FoldedSteps::Point& pt = out.points[p];
            pt.t = fold_value(x, 1, INT64_MIN);
            pt.tensors = static_cast<size_t>(fold_value(x, 3));
            if (fold_value(x, 2) != 0) {
                pt.live.emplace();
                pt.live->fold_in(r, "stepfold.live" + std::to_string(p), f);
                continue;
            }
            Breakdown b;
            b.device = static_cast<int>(fold_value(x, 4, -1));
            b.events_applied = p;
            b.t = pt.t;
            b.total = fold_u64(x, 5);
            // Its moment, by index (Breakdown::moment is set where the report is whole).
            pt.moment = fold_value(x, 6, -1);
            if (pt.moment >= static_cast<int64_t>(r.moments.size())) throw BadFold("stepfold.point: no such moment");
            pt.breakdown = std::move(b);
        } else if (x.name == "stepfold.parts") {
            FoldedSteps::Point& pt = point_at(x);
            if (!pt.breakdown) throw BadFold("stepfold.parts of a point without a breakdown");
            for (size_t i = 1; i < x.values.size();) {
                CategoryPart part;
                const int64_t c = fold_value(x, i++);
                if (c > static_cast<int64_t>(Category::Other)) throw BadFold("stepfold.parts: no such category");
                part.category = static_cast<Category>(c);
                part.bytes = fold_u64(x, i++);
                part.blocks = fold_u64(x, i++);
                part.estimated_bytes = fold_u64(x, i++);
                part.estimate = part.estimated_bytes != 0;
                part.detail = text_at(x, i);
                pt.breakdown->parts.push_back(std::move(part));
            }
        } else if (x.name == "stepfold.end") {
            FoldedStepEnd& e = out.ends[static_cast<size_t>(fold_value(x, 0))];
            e.tensors = static_cast<size_t>(fold_value(x, 1));
            e.blocks = static_cast<size_t>(fold_value(x, 2));
            e.tensor_freed = static_cast<size_t>(fold_value(x, 3));
            e.block_freed_t = fold_value(x, 4) != 0 ? fold_value(x, 5, INT64_MIN) : INT64_MIN;
        } else if (x.name == "stepfold.table") {
            SiteTable& t = table_of(x);
            t.total_bytes = fold_u64(x, 2);
            t.total_blocks = fold_u64(x, 3);
            t.total_handles = fold_u64(x, 4);
            t.total_requested = fold_u64(x, 5);
        } else if (x.name == "stepfold.sites") {
            SiteTable& t = table_of(x);
            if ((x.values.size() - 2) % 6 != 0) throw BadFold("stepfold.sites: a partial site");
            for (size_t i = 2; i < x.values.size(); i += 6) {
                Site s;
                s.stack_id = static_cast<uint32_t>(fold_value(x, i));
                s.python_stack_id = static_cast<uint32_t>(fold_value(x, i + 1));
                s.physical = fold_value(x, i + 2) != 0;
                s.bytes = fold_u64(x, i + 3);
                s.blocks = fold_u64(x, i + 4);
                s.requested = fold_u64(x, i + 5);
                t.sites.push_back(s);
            }
        }
    }
    return out;
}

/// The report of `live` (a copy), with the handles of `r`, for PointBreakdowns::at.
Report point_items(const Report& r, PointSnapshot live, int64_t t, LiveSet& set) {
    Report base;
    base.handles = r.handles;
    return live.into(std::move(base), t, set);
}

/// Adds `plus` and takes away `minus` (the breakdowns of the same items under two sets of tags) to
/// `b`, whose parts stay as PointBreakdowns orders them: by bytes, then category.
void shift_parts(Breakdown& b, const Breakdown& plus, const Breakdown& minus) {
    std::map<std::pair<Category, std::string>, CategoryPart> parts;
    for (CategoryPart& p : b.parts) parts[{p.category, p.detail}] = std::move(p);
    for (const Breakdown* x : {&plus, &minus}) {
        for (const CategoryPart& p : x->parts) {
            CategoryPart& to = parts[{p.category, p.detail}];
            to.category = p.category;
            to.detail = p.detail;
            if (x == &plus) {
                to.bytes = saturating_add(to.bytes, p.bytes);
                to.estimated_bytes = saturating_add(to.estimated_bytes, p.estimated_bytes);
                to.blocks += p.blocks;
            } else {
                to.bytes -= std::min(to.bytes, p.bytes);
                to.estimated_bytes -= std::min(to.estimated_bytes, p.estimated_bytes);
                to.blocks -= std::min(to.blocks, p.blocks);
            }
        }
    }
    b.parts.clear();
    for (auto& [key, p] : parts) {
        if (p.bytes == 0) continue;
        p.estimate = p.estimated_bytes != 0;
        b.parts.push_back(std::move(p));
    }
    std::stable_sort(b.parts.begin(), b.parts.end(),
                     [](const CategoryPart& x, const CategoryPart& y) { return x.bytes > y.bytes; });
}

}  // namespace

/// The tensor blocks live where a fold stands and the GPU blocks that hold them (copies), with the
/// tags known there. A tag names a block for its whole life (allocator mode): a moment after the
/// fold that tags one of them changes the breakdowns of the folded points it was live at, which
/// retag() puts right.
struct FoldCarried {
    Report items;                               // the blocks and tensor blocks
    std::vector<size_t> holder;                 // per tensor block: the block that holds it (SIZE_MAX: none)
    std::unordered_map<size_t, Category> tags;  // where the fold stands

    FoldCarried(const Report& r, const LevelWalk& w, std::unordered_map<size_t, Category> folded)
        : tags(std::move(folded)) {
        for (size_t i = 0; i < r.blocks.size(); ++i) {
            if (w.block_live(i) && is_gpu(r.blocks[i].kind)) items.blocks.push_back(r.blocks[i]);
        }
        std::sort(items.blocks.begin(), items.blocks.end(), [](const Block& a, const Block& b) {
            return std::make_pair(a.device, a.addr) < std::make_pair(b.device, b.addr);
        });
        for (size_t i = 0; i < r.tensors.size(); ++i) {
            if (!w.tensor_live(i)) continue;
            const Tensor& x = r.tensors[i];
            items.tensors.push_back(x);
            auto it = std::upper_bound(items.blocks.begin(), items.blocks.end(), std::make_pair(x.device, x.addr),
                                       [](const std::pair<int, uint64_t>& k, const Block& b) {
                                           return k < std::make_pair(b.device, b.addr);
                                       });
            size_t at = SIZE_MAX;
            if (it != items.blocks.begin()) {
                const Block& b = *std::prev(it);
                if (b.device == x.device && x.addr - b.addr < b.size) {
                    at = static_cast<size_t>(std::prev(it) - items.blocks.begin());
                }
            }
            holder.push_back(at);
        }
    }

    /// Puts right `b`, the breakdown at `p` (where `tensors` T records were read) worked out with
    /// `tags`, for the tensor blocks live there whose tag is `now`'s and was not.
    void retag(Breakdown& b, size_t p, size_t tensors, PointBreakdowns& pb,
               const std::unordered_map<size_t, Category>& now) const {
        LiveSet live;
        live.events_applied = p;
        live.t = b.t;
        std::set<size_t> holders;
        for (size_t i = 0; i < items.tensors.size(); ++i) {
            const size_t order = items.tensors[i].order;
            if (order >= tensors) continue;  // allocated after the point
            auto then = tags.find(order);
            auto later = now.find(order);
            const bool same = then == tags.end() ? later == now.end()
                                                 : later != now.end() && later->second == then->second;
            if (same) continue;
            live.tensors.push_back(i);
            if (holder[i] != SIZE_MAX) holders.insert(holder[i]);
        }
        if (live.tensors.empty()) return;
        live.blocks.assign(holders.begin(), holders.end());
        shift_parts(b, pb.at(items, live, p, b.t, now), pb.at(items, live, p, b.t, tags));
    }
};

struct StepPointsFolder::Change {
    enum Kind : uint8_t { BlockIn, BlockOut, TensorIn, TensorOut, Handle };
    Kind kind = BlockIn;
    bool was_live = false;       // Handle: before the event
    size_t position = 0;         // the event's (the events before it)
    size_t item = 0;             // In: the order; Handle: the handle
    size_t tensors_before = 0;   // T records read before the event
    size_t blocks_before = 0;    // A records
    std::optional<Block> block;  // BlockOut: as it was
    std::optional<Tensor> tensor;
};

struct StepPointsFolder::Point {
    int64_t t = 0;
    size_t tensors = 0;   // T records read before the point
    int64_t moment = -1;  // the breakdown's moment (an index: Report::moments grows while read)
    std::optional<Breakdown> breakdown;
    std::optional<PointSnapshot> live;  // until the breakdown is worked out
    size_t items = 0;                   // in `live`
};

void StepPointsObserver::fold_in(const Report& r, const Fold& f) {
    if (!walk_) walk_.emplace(r);
    walk_->set_applied(f.at.events);
    FoldedSteps folded = read_folded_steps(r, f);
    last_t_ = folded.last_t;
    const size_t here = f.at.events;
    // What the events before the fold's point (the spine's, the carried live set) set is not the run's.
    breakdowns_.clear();
    from_table_ = to_table_ = SiteTable{};
    live_from_.clear();
    from_tensors_ = 0;
    tracked_.clear();
    gc_pending_.clear();
    collections_seen_ = r.collections.size();
    candidates_.clear();
    items_ = GrowthItems{};
    next_point_ = static_cast<size_t>(std::lower_bound(plan_.points.begin(), plan_.points.end(), here) -
                                      plan_.points.begin());
    // The tags of the whole run, where the fold had those known then (a later moment may tag a block
    // live at the fold's point).
    std::optional<FoldCarried> carried;
    if (next_point_ > 0) carried.emplace(r, *walk_, TensorTagObserver::folded(f));
    for (size_t i = 0; i < next_point_; ++i) {
        const size_t p = plan_.points[i];
        auto it = folded.points.find(p);
        if (it == folded.points.end()) {
            throw BadFold("stepfold: no figures at " + std::to_string(p) + " events, where a step's peak or end is");
        }
        FoldedSteps::Point& pt = it->second;
        if (pt.breakdown) {
            const std::vector<Moment>& moments = pb_.report().moments;
            if (pt.moment >= static_cast<int64_t>(moments.size())) throw BadFold("stepfold.point: no such moment");
            if (pt.moment >= 0) pt.breakdown->moment = &moments[static_cast<size_t>(pt.moment)];
            if (carried && pb_.tags() != nullptr) carried->retag(*pt.breakdown, p, pt.tensors, pb_, *pb_.tags());
            breakdowns_.emplace(p, std::move(*pt.breakdown));
            continue;
        }
        // Its moment was not settled where the fold was written: the run's moments now are.
        LiveSet live;
        const Report items = point_items(r, std::move(*pt.live), pt.t, live);
        breakdowns_.emplace(p, pb_.at(items, live, p, pt.t));
    }
    if (!plan_.growth) return;
    const bool exact = plan_.series == Series::Tensors;
    auto end_of = [&](size_t p) -> FoldedSteps::End& {
        auto it = folded.ends.find(p);
        if (it == folded.ends.end()) throw BadFold("stepfold: no step end at " + std::to_string(p) + " events");
        return it->second;
    };
    if (plan_.from < here) {
        FoldedSteps::End& e = end_of(plan_.from);
        from_table_ = exact ? e.tensor : e.gpu;
        from_tensors_ = e.tensors;  // the tensor blocks live there that are live later: the earlier ones
        if (exact) {
            for (const Site& s : e.tensor.sites) items_.site_bytes[{s.stack_id, s.python_stack_id}].first = s.bytes;
        }
    }
    if (plan_.to < here) {
        // What became of the blocks it added is known from the live set here when none of them was
        // freed between its last step end and the fold (those freed are not kept).
        FoldedSteps::End& e = end_of(plan_.to);
        to_table_ = exact ? e.tensor : e.gpu;
        const size_t from_tensors = end_of(plan_.from).tensors;
        // (Estimated: a segment allocated before the last full collection and freed after the last
        // step end counts too: with that end folded as well, it may be among those freed.)
        const bool last_folded = plan_.full_t && plan_.last_end_t <= last_t_;
        if (exact ? e.tensor_freed > from_tensors : e.block_freed_t > plan_.begin_t || last_folded) {
            growth_folded_ = true;
            return;
        }
        if (exact) {
            for (const Site& s : e.tensor.sites) items_.site_bytes[{s.stack_id, s.python_stack_id}].second = s.bytes;
            for (size_t i = 0; i < r.tensors.size(); ++i) {
                const Tensor& x = r.tensors[i];
                if (!walk_->tensor_live(i) || x.order < from_tensors || x.order >= e.tensors) continue;
                tracked_[i] = items_.added.size();
                items_.added.push_back(GrowthItems::Added{x, SIZE_MAX});
            }
        }
    }
    if (exact) return;
    // Estimated: the candidates live here (with the growth's end after the fold, all there are).
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (!walk_->block_live(i)) continue;
        const Block& b = r.blocks[i];
        if (is_gpu(b.kind) && b.t_alloc > plan_.begin_t &&
            (b.t_alloc <= plan_.end_t || (plan_.full_t && b.t_alloc < *plan_.full_t))) {
            candidates_[b.order] = b;
        }
    }
}

StepPointsFolder::StepPointsFolder(const StepRowsObserver& rows, const TensorTagObserver& tags,
                                   BreakdownOptions options)
    : rows_(rows), tags_(tags), options_(std::move(options)) {}

StepPointsFolder::~StepPointsFolder() = default;

const Breakdown* StepPointsFolder::at(size_t position) const {
    auto it = points_.find(position);
    return it == points_.end() || !it->second.breakdown ? nullptr : &*it->second.breakdown;
}

void StepPointsFolder::before(const Report& r, const Event& e) {
    const LevelWalk& w = walk_.get(r);
    if (r.fold_pending) return;  // fold_in sets everything
    close_steps(r);
    handle_.reset();
    switch (e.type) {
    case Event::Alloc:
    case Event::Free:
    case Event::Restore: was_live_ = w.block_live(e.block); break;
    case Event::TensorAlloc:
    case Event::TensorFree: was_live_ = w.tensor_live(e.block); break;
    case Event::Create:
    case Event::Release: handle_ = e.block; break;
    case Event::Unmap: handle_ = r.mappings[e.block].handle; break;
    default: break;
    }
    if (handle_) was_live_ = w.handle_live(*handle_);
}

bool StepPointsFolder::on_event(const Report& r, const Event& e) {
    if (!walk_.shared()) {
        before(r, e);
        walk_.apply(r, e);
    }
    if (r.fold_pending) return true;
    const LevelWalk& w = walk_.get();
    Change c;
    c.position = w.applied() - 1;
    c.tensors_before = tensors_read_;
    c.blocks_before = blocks_read_;
    bool changed = false;
    switch (e.type) {
    case Event::Alloc:
    case Event::Free:
    case Event::Restore:
        if (e.type == Event::Alloc) blocks_read_ = std::max(blocks_read_, r.blocks[e.block].order + 1);
        if (w.block_live(e.block) != was_live_) {
            changed = true;
            const Block& b = r.blocks[e.block];
            if (was_live_) {
                c.kind = Change::BlockOut;
                c.block = b;
                ++held_;
                // The step ends it was live at (the latest ones: allocated before them).
                if (is_gpu(b.kind)) {
                    for (auto it = ends_.rbegin(); it != ends_.rend() && it->second.blocks > b.order; ++it) {
                        it->second.block_freed_t = std::max(it->second.block_freed_t, b.t_alloc);
                    }
                }
            } else {
                c.kind = Change::BlockIn;
                c.item = b.order;
            }
        }
        break;
    case Event::TensorAlloc:
    case Event::TensorFree: {
        const Tensor& x = r.tensors[e.block];
        if (e.type == Event::TensorAlloc) tensors_read_ = std::max(tensors_read_, x.order + 1);
        if (w.tensor_live(e.block) != was_live_) {
            changed = true;
            if (was_live_) {
                c.kind = Change::TensorOut;
                c.tensor = x;
                ++held_;
                for (auto it = ends_.rbegin(); it != ends_.rend() && it->second.tensors > x.order; ++it) {
                    it->second.tensor_freed = std::max(it->second.tensor_freed, x.order + 1);
                }
            } else {
                c.kind = Change::TensorIn;
                c.item = x.order;
            }
        }
        break;
    }
    default:
        if (handle_ && w.handle_live(*handle_) != was_live_) {
            changed = true;
            c.kind = Change::Handle;
            c.item = *handle_;
            c.was_live = was_live_;
        }
    }
    if (changed) log_.push_back(std::move(c));
    last_t_ = e.t;
    best_[0] = {rows_.open_peak(Series::Gpu), rows_.open_peak_t(Series::Gpu)};
    best_[1] = {rows_.open_peak(Series::Tensors), rows_.open_peak_t(Series::Tensors)};
    // A peak to come rolls back no further than the earliest open one.
    const size_t from = std::min(best_[0].first, best_[1].first);
    while (!log_.empty() && log_.front().position < from) {
        if (log_.front().block || log_.front().tensor) --held_;
        log_.pop_front();
    }
    return true;
}

PointSnapshot StepPointsFolder::live_at(const Report& r, size_t p, int64_t t) const {
    const LevelWalk& w = walk_.get();
    std::map<size_t, Block> blocks;
    std::map<size_t, Tensor> tensors;
    std::set<size_t> handles;
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (w.block_live(i)) blocks.emplace(r.blocks[i].order, r.blocks[i]);
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (w.tensor_live(i)) tensors.emplace(r.tensors[i].order, r.tensors[i]);
    }
    for (size_t h = 0; h < r.handles.size(); ++h) {
        if (w.handle_live(h)) handles.insert(h);
    }
    // Undo the changes since the point, the latest first.
    for (auto it = log_.rbegin(); it != log_.rend() && it->position >= p; ++it) {
        switch (it->kind) {
        case Change::BlockIn: blocks.erase(it->item); break;
        case Change::BlockOut: blocks.insert_or_assign(it->block->order, *it->block); break;
        case Change::TensorIn: tensors.erase(it->item); break;
        case Change::TensorOut: tensors.insert_or_assign(it->tensor->order, *it->tensor); break;
        case Change::Handle:
            if (it->was_live) {
                handles.insert(it->item);
            } else {
                handles.erase(it->item);
            }
            break;
        }
    }
    std::vector<Block> b;
    for (auto& [order, x] : blocks) b.push_back(std::move(x));
    std::vector<Tensor> x;
    for (auto& [order, y] : tensors) x.push_back(std::move(y));
    PointSnapshot out;
    out.assign(t, std::move(b), std::move(x), std::vector<size_t>(handles.begin(), handles.end()));
    return out;
}

void StepPointsFolder::keep_point(const Report& r, size_t p, int64_t t) {
    if (points_.count(p) != 0) return;
    Point& pt = points_[p];
    pt.t = p == 0 ? 0 : t;
    pt.tensors = tensors_read_;
    for (const Change& c : log_) {
        if (c.position >= p) {
            pt.tensors = c.tensors_before;
            break;
        }
    }
    pt.live = live_at(r, p, pt.t);
    pt.items = pt.live->size();
    held_ += pt.items;
    if (held_ > kHeldItems) work_out(r, true);
}

void StepPointsFolder::close_steps(const Report& r) {
    const std::vector<StepRow>& gpu = rows_.rows(Series::Gpu);
    const std::vector<StepRow>& tensor = rows_.rows(Series::Tensors);
    const LevelWalk& w = walk_.get();
    const size_t here = w.applied();
    for (; rows_seen_ < gpu.size() && rows_seen_ < tensor.size(); ++rows_seen_) {
        for (size_t s = 0; s < 2; ++s) {
            const size_t p = (s == 0 ? gpu : tensor)[rows_seen_].peak_events;
            // The peak the step reached (the open one until the s record), or the step's begin.
            keep_point(r, p, p == here ? last_t_ : best_[s].second);
        }
        const size_t end = gpu[rows_seen_].events_end;
        keep_point(r, end, last_t_);
        if (ends_.count(end) != 0) continue;
        FoldedStepEnd& e = ends_[end];
        LiveSet live;
        if (end == here) {
            e.tensors = tensors_read_;
            e.blocks = blocks_read_;
            live = live_slots(r, w);
            // In order of A and T records, as on the whole report.
            std::sort(live.blocks.begin(), live.blocks.end(),
                      [&](size_t a, size_t b) { return r.blocks[a].order < r.blocks[b].order; });
            std::sort(live.tensors.begin(), live.tensors.end(),
                      [&](size_t a, size_t b) { return r.tensors[a].order < r.tensors[b].order; });
            e.gpu = group_by_site(r, live, KindFilter::Gpu);
            e.tensor = group_tensors_by_site(r, live);
            continue;
        }
        // An s record behind the events read (not written so): rolled back as a peak is.
        e.tensors = tensors_read_;
        e.blocks = blocks_read_;
        for (const Change& c : log_) {
            if (c.position >= end) {
                e.tensors = c.tensors_before;
                e.blocks = c.blocks_before;
                break;
            }
        }
        const Report items = point_items(r, live_at(r, end, last_t_), last_t_, live);
        e.gpu = group_by_site(items, live, KindFilter::Gpu);
        e.tensor = group_tensors_by_site(items, live);
    }
}

void StepPointsFolder::work_out(const Report& r, bool all, size_t unsettled_kept) {
    const bool allocator_mode = allocator_mode_of(r);
    // The points waiting for their moment past the newest `unsettled_kept` are worked out now.
    std::set<size_t> waiting;
    if (!all && !allocator_mode) {
        for (const auto& [p, pt] : points_) {
            if (pt.live && !moment_settled(r, p)) waiting.insert(p);
        }
        while (waiting.size() > unsettled_kept) waiting.erase(waiting.begin());
    }
    std::optional<PointBreakdowns> pb;
    for (auto& [p, pt] : points_) {
        if (!pt.live || waiting.count(p) != 0) continue;
        if (!pb) pb.emplace(r, options_, &tags_.tags());
        LiveSet live;
        const Report items = point_items(r, std::move(*pt.live), pt.t, live);
        pt.breakdown = pb->at(items, live, p, pt.t);
        pt.moment = pt.breakdown->moment == nullptr ? -1
                                                    : static_cast<int64_t>(pt.breakdown->moment - r.moments.data());
        pt.breakdown->moment = nullptr;
        pt.live.reset();
        held_ -= std::min(held_, pt.items);
        pt.items = 0;
    }
}

void StepPointsFolder::fold_out(const Report& r, FoldWriter& w) {
    // The open step's peaks as they stand: its s record may be read already, or its peak not pass them.
    const size_t here = walk_.get(r).applied();
    for (Series s : {Series::Gpu, Series::Tensors}) {
        const size_t p = rows_.open_peak(s);
        keep_point(r, p, p == here ? last_t_ : rows_.open_peak_t(s));
    }
    work_out(r, false, kUnsettledKept);
    if (carried_) {
        // The breakdowns of the fold it went on from, with the tags known now.
        PointBreakdowns pb(r, options_, &tags_.tags());
        for (auto& [p, pt] : points_) {
            if (p < folded_at_ && pt.breakdown) carried_->retag(*pt.breakdown, p, pt.tensors, pb, tags_.tags());
        }
    }
    // The points a later read may ask for: the steps' peaks, the open step's peaks, and the step ends
    // that may still be a growth's first or last (growth_candidates: `steps` asks for the categories
    // and the site tables at those two ends only), in either series.
    std::set<size_t> wanted, ends;
    for (Series s : {Series::Gpu, Series::Tensors}) {
        const std::vector<StepRow>& rows = rows_.rows(s);
        std::vector<uint64_t> live_at_end;
        live_at_end.reserve(rows.size());
        for (const StepRow& row : rows) {
            wanted.insert(row.peak_events);
            live_at_end.push_back(row.exit_bytes);
        }
        for (size_t i : growth_candidates(live_at_end)) ends.insert(rows[i].events_end);
        wanted.insert(rows_.open_peak(s));
    }
    wanted.insert(ends.begin(), ends.end());
    for (auto it = points_.begin(); it != points_.end();) {
        if (wanted.count(it->first) != 0) {
            ++it;
            continue;
        }
        held_ -= std::min(held_, it->second.items);
        it = points_.erase(it);
    }
    for (auto it = ends_.begin(); it != ends_.end();) it = ends.count(it->first) != 0 ? std::next(it) : ends_.erase(it);
    w.figure("stepfold", {fold_of(rows_seen_), last_t_, fold_of(tensors_read_), fold_of(blocks_read_)});
    for (const auto& [p, pt] : points_) {
        if (pt.breakdown) {
            write_breakdown(w, p, pt.t, pt.tensors, *pt.breakdown, pt.moment);
            continue;
        }
        w.figure("stepfold.point", {fold_of(p), pt.t, 1, fold_of(pt.tensors)});
        pt.live->fold_out("stepfold.live" + std::to_string(p), w);
    }
    for (const auto& [p, e] : ends_) {
        // (A figure's value is never INT64_MIN: no block freed is a flag.)
        const bool freed = e.block_freed_t != INT64_MIN;
        w.figure("stepfold.end", {fold_of(p), fold_of(e.tensors), fold_of(e.blocks), fold_of(e.tensor_freed),
                                  freed ? 1 : 0, freed ? e.block_freed_t : 0});
        write_table(w, p, 0, e.gpu);
        write_table(w, p, 1, e.tensor);
    }
}

void StepPointsFolder::fold_in(const Report& r, const Fold& f) {
    walk_.get(r);
    walk_.fold_in(r, f.at.events);
    FoldedSteps folded = read_folded_steps(r, f);
    rows_seen_ = folded.rows;
    last_t_ = folded.last_t;
    tensors_read_ = folded.tensors;
    blocks_read_ = folded.blocks;
    log_.clear();
    held_ = 0;
    points_.clear();
    for (auto& [p, x] : folded.points) {
        Point& pt = points_[p];
        pt.t = x.t;
        pt.tensors = x.tensors;
        pt.moment = x.moment;
        pt.breakdown = std::move(x.breakdown);
        if (x.live) {
            pt.items = x.live->size();
            held_ += pt.items;
            pt.live = std::move(x.live);
        }
    }
    ends_.clear();
    ends_ = std::move(folded.ends);
    // The open step's peaks (the fold's, the rows' once their fold_in is told) are before the point.
    const size_t here = f.at.events;
    best_[0] = {here, last_t_};
    best_[1] = {here, last_t_};
    folded_at_ = here;
    carried_ = std::make_unique<FoldCarried>(r, walk_.get(), TensorTagObserver::folded(f));
}

}  // namespace memguard::report

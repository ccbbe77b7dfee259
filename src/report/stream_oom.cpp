// The streaming reader's observers of out-of-memory records and collections (report/stream_oom.h).
#include "report/stream_oom.h"

#include <algorithm>

namespace memguard::report {

namespace {

int64_t plus_window(int64_t t, int64_t w) { return t > INT64_MAX - w ? INT64_MAX : t + w; }
int64_t minus_window(int64_t t, int64_t w) { return t < INT64_MIN + w ? INT64_MIN : t - w; }

}  // namespace

/// find_ooms' lookups from what the observer kept; says when it was asked what it did not keep.
class OomObserver::Lookups : public OomLookups {
public:
    explicit Lookups(const OomObserver& o) : o_(o) {}
    size_t events_at(int64_t t) const override {
        auto it = o_.events_at_.find(t);
        return it == o_.events_at_.end() ? SIZE_MAX : it->second;  // behind its record: no point
    }
    std::vector<std::pair<int, uint64_t>> gpu_blocks(uint64_t tid, int64_t from, int64_t to) const override {
        std::vector<std::pair<int, uint64_t>> out;
        auto it = o_.window_of_.find({tid, from});
        if (it == o_.window_of_.end() || !o_.windows_[it->second].complete || o_.windows_[it->second].to != to) {
            inexact = true;
            return out;
        }
        std::vector<Window::Block> first = o_.windows_[it->second].first;
        std::sort(first.begin(), first.end());
        for (const Window::Block& b : first) out.push_back({b.device, b.size});
        return out;
    }
    mutable bool inexact = false;

private:
    const OomObserver& o_;
};

OomObserver::Point OomObserver::take_point(const Report& r, int device) {
    Point p;
    p.known = true;
    p.position = applied_;
    if (!points_) return p;
    p.at = oom_point(r, *walk_, device);
    if (snapshot_at_ != p.position || !snapshot_) {
        auto s = std::make_shared<PointSnapshot>();
        s->take(r, *walk_, last_t_);
        snapshot_ = std::move(s);
        snapshot_at_ = p.position;
    }
    p.live = snapshot_;
    return p;
}

OomObserver::Window& OomObserver::window(uint64_t tid, int64_t from) {
    auto [it, added] = window_of_.try_emplace({tid, from}, windows_.size());
    if (added) {
        Window w;
        w.tid = tid;
        w.from = from;
        w.to = plus_window(from, kRetryWindowNs);
        auto latest = latest_alloc_.find(tid);
        w.complete = latest == latest_alloc_.end() || latest->second < from;
        windows_.push_back(std::move(w));
        by_tid_[tid].emplace(from, it->second);
        cached_latest_ = nullptr;
    }
    return windows_[it->second];
}

bool OomObserver::recovers(const Report& r, const std::pair<size_t, bool>& owner, const Window::Block& b) const {
    if (owner.second) {
        const OomContext& x = r.oom_contexts[owner.first];
        return b.device == x.device && b.size >= x.rounded;
    }
    const FailedAlloc& f = r.failures[owner.first];
    return b.device == f.device && b.size >= f.size;
}

void OomObserver::drop_if_recovered(const Report& r, Window& w) {
    // A CUDA failure followed by an allocation that serves it is recovered (or part of an OOM whose
    // own record has the point): its copy of the live set goes. ooms() checks the guess.
    for (const auto& owner : w.owners) {
        Point& p = owner.second ? context_points_[owner.first] : failure_points_[owner.first];
        if (!p.live) continue;
        for (const Window::Block& b : w.first) {
            if (recovers(r, owner, b)) {
                p.known = false;
                p.live.reset();
                break;
            }
        }
    }
}

void OomObserver::catch_up(const Report& r) {
    if (points_ && !walk_) walk_.emplace(r);  // counts only (summary): no levels
    for (; contexts_ < r.oom_contexts.size(); ++contexts_) {
        const OomContext& x = r.oom_contexts[contexts_];
        context_points_.push_back(take_point(r, x.device));  // x.events_before: the events read so far
        if (x.source == OomSource::Cuda) {
            Window& w = window(x.tid, x.t);
            w.owners.push_back({contexts_, true});
            if (points_) drop_if_recovered(r, w);
        }
    }
    for (; failures_ < r.failures.size(); ++failures_) {
        const FailedAlloc& f = r.failures[failures_];
        failure_points_.emplace_back();
        if (!f.is_oom()) continue;
        window(f.tid, f.t).owners.push_back({failures_, false});
        if (max_t_ <= f.t) waiting_.emplace(f.t, Waiting{false, failures_});  // else its point is behind it
    }
    for (; tensor_ooms_ < r.tensor_ooms.size(); ++tensor_ooms_) {
        const TensorOom& o = r.tensor_ooms[tensor_ooms_];
        tensor_oom_points_.emplace_back();
        if (max_t_ <= o.t) waiting_.emplace(o.t, Waiting{true, tensor_ooms_});
    }
}

void OomObserver::resolve(const Report& r, const int64_t* later) {
    // The records whose time is before this event's: their point is the events applied now.
    while (!waiting_.empty() && (later == nullptr || waiting_.begin()->first < *later)) {
        const auto [t, w] = *waiting_.begin();
        waiting_.erase(waiting_.begin());
        events_at_.emplace(t, applied_);
        if (w.tensor_oom) {
            tensor_oom_points_[w.index] = take_point(r, r.tensor_ooms[w.index].device);
            continue;
        }
        const FailedAlloc& f = r.failures[w.index];
        failure_points_[w.index] = take_point(r, f.device);
        if (points_) drop_if_recovered(r, window(f.tid, f.t));
    }
}

bool OomObserver::on_event(const Report& r, const Event& e) {
    catch_up(r);
    resolve(r, &e.t);
    if (e.type == Event::Alloc && is_gpu(r.blocks[e.block].kind)) {
        const Block& b = r.blocks[e.block];
        if (cached_latest_ == nullptr || cached_tid_ != b.tid) {
            cached_tid_ = b.tid;
            cached_latest_ = &latest_alloc_.try_emplace(b.tid, b.t_alloc).first->second;
            auto windows = by_tid_.find(b.tid);
            cached_windows_ = windows == by_tid_.end() ? nullptr : &windows->second;
        }
        *cached_latest_ = std::max(*cached_latest_, b.t_alloc);
        if (cached_windows_ != nullptr) {
            auto end = cached_windows_->upper_bound(b.t_alloc);
            for (auto it = cached_windows_->lower_bound(minus_window(b.t_alloc, kRetryWindowNs)); it != end; ++it) {
                Window& w = windows_[it->second];
                if (b.t_alloc < w.from || b.t_alloc > w.to) continue;
                const Window::Block x{b.t_alloc, b.order, b.device, b.size};
                if (w.first.size() < kOomScanLimit) {
                    w.first.push_back(x);
                    std::push_heap(w.first.begin(), w.first.end());
                } else if (x < w.first.front()) {
                    std::pop_heap(w.first.begin(), w.first.end());
                    w.first.back() = x;
                    std::push_heap(w.first.begin(), w.first.end());
                } else {
                    continue;
                }
                if (points_) drop_if_recovered(r, w);
            }
        }
    }
    if (walk_) walk_->apply(e);
    ++applied_;
    last_t_ = e.t;
    max_t_ = std::max(max_t_, e.t);
    return true;
}

void OomObserver::on_end(const Report& r) {
    catch_up(r);
    resolve(r, nullptr);
}

const OomObserver::Point* OomObserver::point_of(const OomEvent& e) const {
    if (e.context) return &context_points_[*e.context];
    if (e.tensor_oom) return &tensor_oom_points_[*e.tensor_oom];
    if (e.failure) return &failure_points_[*e.failure];
    return nullptr;
}

std::optional<std::vector<OomEvent>> OomObserver::ooms(const Report& r) const {
    Lookups lookups(*this);
    std::vector<OomEvent> out = find_ooms(r, lookups);
    if (lookups.inexact) return std::nullopt;
    if (points_) {
        for (const OomEvent& e : out) {
            if (e.recovered) continue;
            const Point* p = point_of(e);
            if (p == nullptr || !p->known || !p->live || p->position != e.events_before) return std::nullopt;
        }
    }
    return out;
}

OomFigures OomObserver::figures(const Report& r, const OomEvent& e) const { return oom_figures(r, e, point_of(e)->at); }

Report OomObserver::point_report(const Report& r, const OomEvent& e) const {
    LiveSet set;
    int64_t last_t = 0;
    return point_report(r, e, set, last_t);
}

Report OomObserver::point_report(const Report& r, const OomEvent& e, LiveSet& live, int64_t& last_t) const {
    PointSnapshot point = *point_of(e)->live;
    last_t = point.last_t();
    return point.into(r, 0, live);
}

void OomObserver::fold_out(const Report& r, FoldWriter& w) {
    (void)r;
    // (max_t_ before any event is INT64_MIN, which a figure does not hold: a flag.)
    const bool any = max_t_ != INT64_MIN;
    w.figure("oom", {fold_of(applied_), any ? max_t_ : 0, last_t_, fold_of(failures_), fold_of(tensor_ooms_),
                     fold_of(contexts_), any ? 1 : 0});
    for (const auto& [tid, t] : latest_alloc_) w.figure("oom.latest", {fold_of(tid), t});
    for (const auto& [t, x] : waiting_) w.figure("oom.waiting", {t, x.tensor_oom ? 1 : 0, fold_of(x.index)});
    for (const auto& [t, events] : events_at_) w.figure("oom.events_at", {t, fold_of(events)});
    // Each live set once (records at one point share one), by its number in order of first use.
    std::map<const PointSnapshot*, int64_t> ids;
    int64_t kind = 0;
    for (const auto* points : {&failure_points_, &tensor_oom_points_, &context_points_}) {
        for (size_t i = 0; i < points->size(); ++i) {
            const Point& p = (*points)[i];
            int64_t id = -1;
            if (p.live) {
                auto [it, added] = ids.emplace(p.live.get(), static_cast<int64_t>(ids.size()));
                if (added) p.live->fold_out("oom.live" + std::to_string(it->second), w);
                id = it->second;
            }
            w.figure("oom.point",
                     {kind, fold_of(i), p.known ? 1 : 0, fold_of(p.position), fold_of(p.at.this_process), id});
            if (!p.at.segment_gaps.empty()) {
                std::vector<int64_t> v{kind, fold_of(i)};
                for (uint64_t g : p.at.segment_gaps) v.push_back(fold_of(g));
                w.figure("oom.gaps", v);
            }
        }
        ++kind;
    }
    for (const Window& x : windows_) {
        w.figure("oom.window", {fold_of(x.tid), x.from, x.to, x.complete ? 1 : 0});
        for (const Window::Block& b : x.first)
            w.figure("oom.window.block", {b.t, fold_of(b.order), b.device, fold_of(b.size)});
        for (const auto& [index, context] : x.owners) w.figure("oom.window.owner", {fold_of(index), context ? 1 : 0});
    }
}

void OomObserver::fold_in(const Report& r, const Fold& f) {
    bool found = false;
    f.each("oom", [&](const Fold::Figure& x) {
        found = true;
        applied_ = static_cast<size_t>(fold_value(x, 0));
        max_t_ = fold_value(x, 6) != 0 ? fold_value(x, 1, INT64_MIN) : INT64_MIN;
        last_t_ = fold_value(x, 2, INT64_MIN);
        failures_ = static_cast<size_t>(fold_value(x, 3));
        tensor_ooms_ = static_cast<size_t>(fold_value(x, 4));
        contexts_ = static_cast<size_t>(fold_value(x, 5));
    });
    if (!found) throw BadFold("no figure 'oom'");
    if (failures_ > r.failures.size() || tensor_ooms_ > r.tensor_ooms.size() || contexts_ > r.oom_contexts.size()) {
        throw BadFold("oom: more records looked at than the report has");
    }
    if (points_) {
        if (!walk_) walk_.emplace(r);
        walk_->set_applied(applied_);
    }
    latest_alloc_.clear();
    f.each("oom.latest", [&](const Fold::Figure& x) { latest_alloc_[fold_u64(x, 0)] = fold_value(x, 1, INT64_MIN); });
    waiting_.clear();
    f.each("oom.waiting", [&](const Fold::Figure& x) {
        const bool tensor_oom = fold_value(x, 1) != 0;
        const auto index = static_cast<size_t>(fold_value(x, 2));
        if (index >= (tensor_oom ? tensor_ooms_ : failures_))
            throw BadFold("oom.waiting: no record " + std::to_string(index));
        waiting_.emplace(fold_value(x, 0, INT64_MIN), Waiting{tensor_oom, index});
    });
    events_at_.clear();
    f.each("oom.events_at", [&](const Fold::Figure& x) {
        events_at_[fold_value(x, 0, INT64_MIN)] = static_cast<size_t>(fold_value(x, 1));
    });
    failure_points_.assign(failures_, Point{});
    tensor_oom_points_.assign(tensor_ooms_, Point{});
    context_points_.assign(contexts_, Point{});
    std::vector<Point>* kinds[] = {&failure_points_, &tensor_oom_points_, &context_points_};
    auto point_of = [&](const Fold::Figure& x) -> Point& {
        const int64_t kind = fold_value(x, 0);
        const int64_t i = fold_value(x, 1);
        if (kind > 2 || static_cast<size_t>(i) >= kinds[kind]->size()) throw BadFold(x.name + ": no such record");
        return (*kinds[kind])[static_cast<size_t>(i)];
    };
    std::map<int64_t, std::shared_ptr<const PointSnapshot>> live;
    f.each("oom.point", [&](const Fold::Figure& x) {
        Point& p = point_of(x);
        p.known = fold_value(x, 2) != 0;
        p.position = static_cast<size_t>(fold_value(x, 3));
        p.at.this_process = fold_u64(x, 4);
        const int64_t id = fold_value(x, 5, -1);
        if (id < 0 || !points_) return;
        std::shared_ptr<const PointSnapshot>& s = live[id];
        if (!s) {
            auto snapshot = std::make_shared<PointSnapshot>();
            snapshot->fold_in(r, "oom.live" + std::to_string(id), f);
            s = std::move(snapshot);
        }
        p.live = s;
    });
    f.each("oom.gaps", [&](const Fold::Figure& x) {
        Point& p = point_of(x);
        for (size_t i = 2; i < x.values.size(); ++i) p.at.segment_gaps.push_back(fold_u64(x, i));
    });
    windows_.clear();
    window_of_.clear();
    by_tid_.clear();
    for (const Fold::Figure& x : f.figures) {
        if (x.name == "oom.window") {
            Window w;
            w.tid = fold_u64(x, 0);
            w.from = fold_value(x, 1, INT64_MIN);
            w.to = fold_value(x, 2, INT64_MIN);
            w.complete = fold_value(x, 3) != 0;
            const size_t index = windows_.size();
            if (!window_of_.emplace(std::make_pair(w.tid, w.from), index).second) throw BadFold("oom.window twice");
            by_tid_[w.tid].emplace(w.from, index);
            windows_.push_back(std::move(w));
        } else if (x.name == "oom.window.block" || x.name == "oom.window.owner") {
            if (windows_.empty()) throw BadFold(x.name + " before its window");
            Window& w = windows_.back();
            if (x.name == "oom.window.block") {
                w.first.push_back(Window::Block{fold_value(x, 0, INT64_MIN), static_cast<size_t>(fold_value(x, 1)),
                                                static_cast<int>(fold_value(x, 2, -1)), fold_u64(x, 3)});
            } else {
                const auto index = static_cast<size_t>(fold_value(x, 0));
                const bool context = fold_value(x, 1) != 0;
                if (index >= (context ? contexts_ : failures_)) throw BadFold("oom.window.owner: no record");
                w.owners.emplace_back(index, context);
            }
        }
    }
    cached_tid_ = 0;
    cached_latest_ = nullptr;
    cached_windows_ = nullptr;
    snapshot_at_ = SIZE_MAX;
    snapshot_.reset();
}

size_t OomObserver::live_sets_kept() const {
    std::vector<const PointSnapshot*> kept;
    for (const auto* points : {&failure_points_, &tensor_oom_points_, &context_points_}) {
        for (const Point& p : *points) {
            if (p.live) kept.push_back(p.live.get());
        }
    }
    std::sort(kept.begin(), kept.end());
    return static_cast<size_t>(std::unique(kept.begin(), kept.end()) - kept.begin());
}

CollectionFrees collection_frees(const Report& r) {
    CollectionFrees out;
    out.by_site.resize(r.collections.size());
    for (const Tensor& x : r.tensors) {
        if (x.t_free && x.freed_in_gc && !x.collection) ++out.unattributed;
        if (!x.collection) continue;
        Site& site = out.by_site[*x.collection][{x.stack_id, x.python_stack_id}];
        site.stack_id = x.stack_id;
        site.python_stack_id = x.python_stack_id;
        site.bytes += x.size;
        site.requested += x.requested;
        ++site.blocks;
    }
    return out;
}

void CollectionFreesObserver::catch_up(const Report& r) {
    // As the parser does at each Y: the frees its thread made in a collection since its last Y.
    out_.by_site.resize(r.collections.size());
    for (; seen_ < r.collections.size(); ++seen_) {
        auto pending = pending_.find(r.collections[seen_].tid);
        if (pending == pending_.end()) continue;
        out_.by_site[seen_] = std::move(pending->second);
        pending_.erase(pending);
    }
}

bool CollectionFreesObserver::on_event(const Report& r, const Event& e) {
    catch_up(r);
    if (e.type != Event::TensorFree) return true;
    const Tensor& x = r.tensors[e.block];
    // A tensor taken as freed by a T over it (no t record) was not freed in a collection.
    if (!x.freed_in_gc) return true;
    Site& site = pending_[x.free_tid][{x.stack_id, x.python_stack_id}];
    site.stack_id = x.stack_id;
    site.python_stack_id = x.python_stack_id;
    site.bytes += x.size;
    site.requested += x.requested;
    ++site.blocks;
    return true;
}

namespace {

void site_figure(FoldWriter& w, std::string_view name, int64_t owner, const Site& s) {
    w.figure(name, {owner, s.stack_id, s.python_stack_id, fold_of(s.bytes), fold_of(s.requested), fold_of(s.blocks)});
}

Site site_of(const Fold::Figure& x) {
    Site s;
    s.stack_id = static_cast<uint32_t>(fold_value(x, 1));
    s.python_stack_id = static_cast<uint32_t>(fold_value(x, 2));
    s.bytes = fold_u64(x, 3);
    s.requested = fold_u64(x, 4);
    s.blocks = fold_u64(x, 5);
    return s;
}

}  // namespace

void CollectionFreesObserver::fold_out(const Report& r, FoldWriter& w) {
    (void)r;
    w.figure("collections", {fold_of(seen_), fold_of(out_.unattributed)});
    for (size_t i = 0; i < out_.by_site.size(); ++i) {
        for (const auto& [key, site] : out_.by_site[i]) site_figure(w, "collections.site", fold_of(i), site);
    }
    for (const auto& [tid, sites] : pending_) {
        for (const auto& [key, site] : sites) site_figure(w, "collections.pending", fold_of(tid), site);
    }
}

void CollectionFreesObserver::fold_in(const Report& r, const Fold& f) {
    bool found = false;
    f.each("collections", [&](const Fold::Figure& x) {
        found = true;
        seen_ = static_cast<size_t>(fold_value(x, 0));
        out_ = CollectionFrees{};
        out_.unattributed = fold_u64(x, 1);
    });
    if (!found) throw BadFold("no figure 'collections'");
    if (seen_ > r.collections.size()) throw BadFold("collections: more looked at than the report has");
    out_.by_site.resize(seen_);
    f.each("collections.site", [&](const Fold::Figure& x) {
        const auto i = static_cast<size_t>(fold_value(x, 0));
        if (i >= seen_) throw BadFold("collections.site: no collection " + std::to_string(i));
        const Site s = site_of(x);
        out_.by_site[i][{s.stack_id, s.python_stack_id}] = s;
    });
    pending_.clear();
    f.each("collections.pending", [&](const Fold::Figure& x) {
        const Site s = site_of(x);
        pending_[fold_u64(x, 0)][{s.stack_id, s.python_stack_id}] = s;
    });
}

void CollectionFreesObserver::on_end(const Report& r) {
    catch_up(r);
    for (const auto& [tid, sites] : pending_) {
        for (const auto& [key, site] : sites) out_.unattributed += site.blocks;
    }
}

}  // namespace memguard::report

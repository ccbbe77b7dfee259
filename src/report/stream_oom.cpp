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

void CollectionFreesObserver::on_end(const Report& r) {
    catch_up(r);
    for (const auto& [tid, sites] : pending_) {
        for (const auto& [key, site] : sites) out_.unattributed += site.blocks;
    }
}

}  // namespace memguard::report

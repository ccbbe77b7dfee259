// The streaming reader's observers of a point (report/stream.h); SummaryBuilder is in analysis.cpp,
// beside summarize(), and the reader itself in report.cpp.
#include "report/stream.h"

#include <sys/stat.h>

#include <algorithm>
#include <numeric>
#include <utility>

namespace memguard::report {

bool rereadable(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool PointObserver::on_event(const Report& r, const Event& e) {
    if (!walk_) walk_.emplace(r);
    if (!taken_ && ((events_ && walk_->applied() >= *events_) || (after_t_ && e.t > *after_t_))) {
        point_.take(r, *walk_, last_t_);
        position_ = walk_->applied();
        taken_ = true;
        if (stop_) return false;  // the rest of the file cannot change the point
    }
    if (taken_) return true;  // a first pass goes on for the rest of the report
    walk_->apply(e);
    last_t_ = e.t;
    return true;
}

void PointObserver::fold_in(const Report& r, const Fold& f) {
    if (!walk_) walk_.emplace(r);
    walk_->set_applied(f.at.events);
    last_t_ = f.at.t;
    // At or after the fold's point the point is in the detail read from here on.
    before_fold_ = (events_ && *events_ < f.at.events) || (after_t_ && *after_t_ < f.at.t);
}

void PointObserver::on_end(const Report& r) {
    if (!walk_) walk_.emplace(r);
    if (!taken_) {
        point_.take(r, *walk_, last_t_);
        position_ = walk_->applied();
    }
    taken_ = true;
}

void PointSnapshot::clear() {
    blocks_.clear();
    tensors_.clear();
    handles_.clear();
    last_t_ = 0;
}

void PointSnapshot::take(const Report& r, const LevelWalk& walk, int64_t last_t) {
    clear();
    last_t_ = last_t;
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        if (!walk.block_live(b)) continue;
        Block x = r.blocks[b];
        x.t_free.reset();  // a block whose F is the next event: live at the point
        x.free_api.clear();
        x.free_tid = 0;
        blocks_.push_back(std::move(x));
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (!walk.tensor_live(i)) continue;
        Tensor x = r.tensors[i];
        x.t_free.reset();
        x.free_tid = 0;
        x.freed_in_gc = false;
        tensors_.push_back(std::move(x));
    }
    for (size_t h = 0; h < r.handles.size(); ++h) {
        if (walk.handle_live(h)) handles_.push_back(h);
    }
    auto by_order = [](const auto& a, const auto& b) { return a.order < b.order; };
    std::sort(blocks_.begin(), blocks_.end(), by_order);
    std::sort(tensors_.begin(), tensors_.end(), by_order);
}

void PointSnapshot::assign(int64_t last_t, std::vector<Block> blocks, std::vector<Tensor> tensors,
                           std::vector<size_t> handles) {
    last_t_ = last_t;
    blocks_ = std::move(blocks);
    tensors_ = std::move(tensors);
    handles_ = std::move(handles);
    for (Block& x : blocks_) {
        x.t_free.reset();
        x.free_api.clear();
        x.free_tid = 0;
    }
    for (Tensor& x : tensors_) {
        x.t_free.reset();
        x.free_tid = 0;
        x.freed_in_gc = false;
    }
    auto by_order = [](const auto& a, const auto& b) { return a.order < b.order; };
    std::sort(blocks_.begin(), blocks_.end(), by_order);
    std::sort(tensors_.begin(), tensors_.end(), by_order);
    std::sort(handles_.begin(), handles_.end());
}

void PointSnapshot::fold_out(std::string_view name, FoldWriter& w) const {
    const std::string n(name);
    w.figure(n, {last_t_});
    constexpr size_t kPerRecord = 300;
    for (size_t i = 0; i < handles_.size(); i += kPerRecord) {
        std::vector<int64_t> v;
        for (size_t j = i; j < std::min(handles_.size(), i + kPerRecord); ++j) v.push_back(fold_of(handles_[j]));
        w.figure(n + ".handles", v);
    }
    for (const Block& b : blocks_) w.block(n + ".block", b, {fold_of(b.order)});
    for (const Tensor& x : tensors_) w.tensor(n + ".tensor", x, {fold_of(x.order)});
}

void PointSnapshot::fold_in(const Report& r, std::string_view name, const Fold& f) {
    clear();
    const std::string n(name);
    f.each(n, [&](const Fold::Figure& x) { last_t_ = fold_value(x, 0, INT64_MIN); });
    f.each(n + ".handles", [&](const Fold::Figure& x) {
        for (size_t i = 0; i < x.values.size(); ++i) {
            const int64_t h = fold_value(x, i);
            if (static_cast<uint64_t>(h) >= r.handles.size()) {
                throw BadFold("figure " + x.name + ": handle " + std::to_string(h) + " is not one of the report's");
            }
            handles_.push_back(static_cast<size_t>(h));
        }
    });
    f.each(n + ".block", [&](const Fold::Figure& x) {
        if (!x.block) throw BadFold("figure " + x.name + " without its block");
        blocks_.push_back(*x.block);
        blocks_.back().order = static_cast<size_t>(fold_value(x, 0));
    });
    f.each(n + ".tensor", [&](const Fold::Figure& x) {
        if (!x.tensor) throw BadFold("figure " + x.name + " without its tensor");
        tensors_.push_back(*x.tensor);
        tensors_.back().order = static_cast<size_t>(fold_value(x, 0));
    });
}

Report PointSnapshot::into(Report base, int64_t t, LiveSet& live) {
    base.blocks = std::move(blocks_);
    base.tensors = std::move(tensors_);
    base.events.clear();
    base.events.reserve(base.blocks.size() + base.tensors.size() + handles_.size());
    for (size_t i = 0; i < base.blocks.size(); ++i) base.events.push_back(Event{Event::Alloc, i, last_t_});
    for (size_t i = 0; i < base.tensors.size(); ++i) base.events.push_back(Event{Event::TensorAlloc, i, last_t_});
    for (size_t h : handles_) base.events.push_back(Event{Event::Create, h, last_t_});
    live = LiveSet{};
    live.events_applied = base.events.size();
    live.t = t;
    live.blocks.resize(base.blocks.size());
    std::iota(live.blocks.begin(), live.blocks.end(), size_t{0});
    live.tensors.resize(base.tensors.size());
    std::iota(live.tensors.begin(), live.tensors.end(), size_t{0});
    live.handles = std::move(handles_);
    return base;
}

namespace {

uint64_t plus(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

}  // namespace

void PeakObserver::copy(const Report& r, Series& s) {
    s.pending = false;
    if (gave_up_) return;
    const LevelWalk& w = walk_.get(r);
    work_ += s.point.cost(r);
    if (budget_ == Budget::Slots && work_ > kBudget * w.applied() + (size_t{1} << 20)) {
        gave_up_ = true;  // the second pass is cheaper from here; a peak from a fold has none
        if (!gpu_.folded) gpu_.point.clear();
        if (!tensor_.folded) tensor_.point.clear();
        return;
    }
    s.point.take(r, w, last_t_);
}

void PeakObserver::fold_out(const Report& r, FoldWriter& w) {
    // A pending peak's live set is the one now: the fold stands between two events.
    if (gpu_.pending) copy(r, gpu_);
    if (tensor_.pending) copy(r, tensor_);
    w.figure("peak", {fold_of(gpu_.best), fold_of(gpu_.events), fold_of(tensor_.best), fold_of(tensor_.events),
                      gave_up_ ? 1 : 0, last_t_, fold_of(work_)});
    if (gave_up_) return;
    gpu_.point.fold_out("peak.gpu", w);
    tensor_.point.fold_out("peak.tensor", w);
}

void PeakObserver::fold_in(const Report& r, const Fold& f) {
    walk_.fold_in(r, f.at.events);
    bool found = false;
    f.each("peak", [&](const Fold::Figure& x) {
        found = true;
        gpu_.best = fold_u64(x, 0);
        gpu_.events = static_cast<size_t>(fold_value(x, 1));
        tensor_.best = fold_u64(x, 2);
        tensor_.events = static_cast<size_t>(fold_value(x, 3));
        gave_up_ = fold_value(x, 4) != 0;
        last_t_ = fold_value(x, 5, INT64_MIN);
        work_ = static_cast<size_t>(fold_value(x, 6));
    });
    if (!found) throw BadFold("no figure 'peak'");
    for (auto [s, name] : {std::pair{&gpu_, "peak.gpu"}, std::pair{&tensor_, "peak.tensor"}}) {
        s->pending = false;
        s->folded = !gave_up_;
        if (gave_up_) {
            s->point.clear();
        } else {
            s->point.fold_in(r, name, f);
        }
    }
}

void PeakObserver::before(const Report& r, const Event& e) {
    const Levels& l = walk_.get(r).levels();
    // A pending peak stands unless this event raises its series again: copy its live set first.
    if (gpu_.pending) {
        bool raises = false;
        if ((e.type == Event::Alloc || e.type == Event::Restore) && is_gpu(r.blocks[e.block].kind)) {
            raises = plus(l.gpu_bytes, r.blocks[e.block].size) > gpu_.best;
        } else if (e.type == Event::Create && r.handles[e.block].device >= 0) {
            raises = plus(l.gpu_bytes, r.handles[e.block].size) > gpu_.best;
        }
        if (!raises) copy(r, gpu_);
    }
    if (tensor_.pending &&
        !(e.type == Event::TensorAlloc && plus(l.tensor_bytes, r.tensors[e.block].size) > tensor_.best)) {
        copy(r, tensor_);
    }
}

bool PeakObserver::on_event(const Report& r, const Event& e) {
    if (!walk_.shared()) {
        before(r, e);
        walk_.apply(r, e);
    }
    const LevelWalk& w = walk_.get(r);
    const Levels& l = w.levels();
    last_t_ = e.t;
    // As SummaryBuilder finds the peaks.
    if (w.last_changed_gpu() && l.gpu_bytes > gpu_.best) {
        gpu_.best = l.gpu_bytes;
        gpu_.events = w.applied();
        gpu_.pending = true;
        gpu_.folded = false;
    }
    if (w.last_changed_tensor() && l.tensor_bytes > tensor_.best) {
        tensor_.best = l.tensor_bytes;
        tensor_.events = w.applied();
        tensor_.pending = true;
        tensor_.folded = false;
    }
    return true;
}

void PeakObserver::on_end(const Report& r) {
    if (gpu_.pending) copy(r, gpu_);
    if (tensor_.pending) copy(r, tensor_);
}

bool PeakObserver::has(bool tensors, size_t events) const {
    const Series& s = tensors ? tensor_ : gpu_;
    return (!gave_up_ || s.folded) && s.events == events;
}

Report PeakObserver::take(bool tensors, Report base, int64_t t, LiveSet& live) {
    return (tensors ? tensor_ : gpu_).point.into(std::move(base), t, live);
}

void Observers::start(const Report& r) {
    if (started_) return;
    started_ = true;
    walk_.emplace(r);
    bool taken = false;
    for (EventObserver* o : all_) taken = o->share_walk(*walk_) || taken;
    if (!taken) walk_.reset();
}

bool Observers::on_event(const Report& r, const Event& e) {
    start(r);
    if (walk_) {
        for (EventObserver* o : all_) o->before(r, e);
        walk_->apply(e);
    }
    bool more = false;
    for (EventObserver* o : all_) more = o->on_event(r, e) || more;
    return more;
}

void Observers::on_phase(const Report& r, size_t phase) {
    start(r);
    for (EventObserver* o : all_) o->on_phase(r, phase);
}

void Observers::on_end(const Report& r) {
    start(r);
    for (EventObserver* o : all_) o->on_end(r);
}

void Observers::fold_out(const Report& r, FoldWriter& w) {
    start(r);
    for (EventObserver* o : all_) o->fold_out(r, w);
}

void Observers::fold_in(const Report& r, const Fold& f) {
    start(r);
    if (walk_) walk_->set_applied(f.at.events);
    for (EventObserver* o : all_) o->fold_in(r, f);
}

bool Observers::at_part(const Report& r, const FoldPoint& at) {
    start(r);
    bool more = true;
    for (EventObserver* o : all_) more = o->at_part(r, at) && more;
    return more;
}

}  // namespace memguard::report

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
        snapshot(r);
        if (stop_) return false;  // the rest of the file cannot change the point
    }
    if (taken_) return true;  // a first pass goes on for the rest of the report
    walk_->apply(e);
    last_t_ = e.t;
    return true;
}

void PointObserver::on_end(const Report& r) {
    if (!walk_) walk_.emplace(r);
    if (!taken_) snapshot(r);
}

void PointObserver::snapshot(const Report& r) {
    taken_ = true;
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        if (!walk_->block_live(b)) continue;
        Block x = r.blocks[b];
        x.t_free.reset();  // a block whose F is the next event: live at the point
        x.free_api.clear();
        x.free_tid = 0;
        blocks_.push_back(std::move(x));
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (!walk_->tensor_live(i)) continue;
        Tensor x = r.tensors[i];
        x.t_free.reset();
        x.free_tid = 0;
        x.freed_in_gc = false;
        tensors_.push_back(std::move(x));
    }
    for (size_t h = 0; h < r.handles.size(); ++h) {
        if (walk_->handle_live(h)) handles_.push_back(h);
    }
    auto by_order = [](const auto& a, const auto& b) { return a.order < b.order; };
    std::sort(blocks_.begin(), blocks_.end(), by_order);
    std::sort(tensors_.begin(), tensors_.end(), by_order);
}

Report PointObserver::take(Report base, int64_t t, LiveSet& live) {
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

}  // namespace memguard::report

// The reader's event records: compiles (X) and collections (Y) (docs/report-format.md, minor 2),
// phases (B, b) and marks (J) (minor 4). The writer's side is track/records_events.cpp.
#include <string>

#include "report/parser.h"
#include "report/stream.h"

namespace memguard::report {

void Parser::apply(const rec::Compile& r) {
    Compile x;
    x.t = r.t;
    x.tid = r.tid;
    x.id = std::string(r.compile_id);
    report_.compiles.push_back(std::move(x));
}

void Parser::apply(const rec::Collection& r) {
    Collection y;
    y.t = r.t;
    y.tid = r.tid;
    y.trigger = r.trigger;
    y.generation = r.generation;
    y.duration_ns = r.duration_ns;
    y.collected = r.collected;
    y.uncollectable = r.uncollectable;
    y.cuda_bytes_freed = r.cuda_bytes_freed;
    if (r.compile_ids) {
        std::string_view ids = *r.compile_ids;
        size_t start = 0;
        while (true) {
            size_t comma = ids.find(',', start);
            y.compile_ids.emplace_back(ids.substr(start, comma - start));
            if (comma == std::string_view::npos) break;
            start = comma + 1;
        }
    }
    y.mark_age_ns = r.mark_age_ns;
    y.skipped = r.skipped;
    if (r.explain) {
        auto it = explanations_.find(*r.explain);
        if (it == explanations_.end() || report_.explanations[it->second].collection) {
            warn("unknown-explain",
                 "Y record names explanation " + std::to_string(*r.explain) + ", which is not open; ignored");
        } else {
            y.explanation = it->second;
            report_.explanations[it->second].collection = report_.collections.size();
        }
    }
    // The blocks this thread freed while the collection ran (t records with gc 1) belong to it.
    auto pending = gc_frees_.find(y.tid);
    if (pending != gc_frees_.end()) {
        for (size_t i : pending->second) report_.tensors[i].collection = report_.collections.size();
        gc_frees_.erase(pending);
    }
    report_.collections.push_back(std::move(y));
}

void Parser::apply(const rec::PhaseBegin& r) {
    Phase p;
    p.t_begin = r.t;
    p.tid = r.tid;
    p.id = static_cast<uint32_t>(r.phase_id);  // the decoder refuses ids of 2^32 and more
    p.source = r.source;
    p.name = std::string(r.name);
    p.events_at_begin = event_count();
    p.begin_line = line_no_;
    if (phases_.count(p.id) != 0) {
        warn("dup-phase", "phase " + std::to_string(p.id) + " begun twice; the second B record is ignored");
        return;
    }
    phases_[p.id] = report_.phases.size();
    report_.phases.push_back(std::move(p));
    if (observer_ != nullptr && !stopped_) observer_->on_phase(report_, report_.phases.size() - 1);
}

void Parser::apply(const rec::PhaseEnd& r) {
    const auto id = static_cast<uint32_t>(r.phase_id);
    auto it = phases_.find(id);
    if (it == phases_.end()) {
        warn("unknown-phase",
             "b record ends phase " + std::to_string(id) + ", which no earlier B record began; ignored");
        return;
    }
    Phase& p = report_.phases[it->second];
    if (p.t_end) {
        warn("phase-ended-twice", "phase " + std::to_string(id) + " ended twice; the second b record is ignored");
        return;
    }
    p.t_end = r.t;
    p.end_tid = r.tid;
    p.events_at_end = event_count();
    p.end_line = line_no_;
    if (observer_ != nullptr && !stopped_) observer_->on_phase(report_, it->second);
}

void Parser::apply(const rec::Mark& r) {
    Mark m;
    m.t = r.t;
    m.tid = r.tid;
    m.source = r.source;
    m.name = std::string(r.name);
    m.events_before = event_count();
    report_.marks.push_back(std::move(m));
}

}  // namespace memguard::report

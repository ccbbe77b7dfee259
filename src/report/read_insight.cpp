// The reader's insight records (docs/report-format.md, minor 8): steps (s), moments (h, g, d, k)
// and out-of-memory contexts (x). The writer's side is track/records_insight.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::Step& r) {
    if (!report_.steps.empty() && r.step <= report_.steps.back().index) {
        warn("step-order", "s record for step " + std::to_string(r.step) + " after step " +
                               std::to_string(report_.steps.back().index) + "; kept, in file order");
    }
    Step s;
    s.index = r.step;
    s.source = r.source;
    s.name = std::string(r.name);
    s.t = r.t;
    s.tid = r.tid;
    s.events_before = event_count();
    report_.steps.push_back(std::move(s));
}

void Parser::apply(const rec::MomentBegin& r) {
    if (moments_.count(r.moment) != 0) {
        warn("dup-moment", "moment " + std::to_string(r.moment) + " begun twice; the second h record is ignored");
        return;
    }
    Moment m;
    m.id = r.moment;
    m.t = r.t;
    m.tid = r.tid;
    m.reason = r.reason;
    m.step = r.step;
    m.events_before = event_count();
    moments_[m.id] = report_.moments.size();
    report_.moments.push_back(std::move(m));
}

namespace {
/// The open moment `id` of `moments`, or null.
Moment* open_moment(std::unordered_map<uint32_t, size_t>& ids, std::vector<Moment>& moments, uint32_t id) {
    return find_open(ids, moments, id, [](const Moment& m) { return m.ended; });
}
}  // namespace

void Parser::apply(const rec::TensorTag& r) {
    Moment* m = open_moment(moments_, report_.moments, r.moment);
    if (m == nullptr) {
        warn("unknown-moment", "g record names moment " + std::to_string(r.moment) + ", which is not open; ignored");
        return;
    }
    if (!format::is_tensor_category(r.category)) {
        warn("tag-category", "g record gives a tensor the category " + std::string(format::name_of(r.category)) +
                                 ", which only the reader decides; ignored");
        return;
    }
    TensorTag g;
    g.device = r.device;
    g.addr = r.addr;
    g.size = r.size;
    g.category = r.category;
    if (r.label) g.label = std::string(*r.label);
    m->tags.push_back(std::move(g));
}

void Parser::apply(const rec::AllocatorBlock& r) {
    Moment* m = open_moment(moments_, report_.moments, r.moment);
    if (m == nullptr) {
        warn("unknown-moment", "d record names moment " + std::to_string(r.moment) + ", which is not open; ignored");
        return;
    }
    AllocatorBlock d;
    d.device = r.device;
    d.addr = r.addr;
    d.size = r.size;
    d.requested = r.requested;
    d.state = r.state;
    d.segment = r.segment;
    d.pool = std::string(r.pool);
    m->blocks.push_back(std::move(d));
}

void Parser::apply(const rec::OomContext& r) {
    OomContext x;
    x.t = r.t;
    x.tid = r.tid;
    x.device = r.device;
    x.source = r.source;
    x.requested = r.requested;
    x.rounded = r.rounded;
    x.limit = r.limit;
    x.device_free = r.device_free;
    x.device_total = r.device_total;
    x.allocated = r.allocated;
    x.reserved = r.reserved;
    x.stack_id = r.stack_id;
    x.python_stack_id = r.python_stack_id;
    check_stack_ref(r.stack_id, "x");
    check_python_stack_ref(r.python_stack_id, "x");
    if (r.moment != 0) {
        auto it = moments_.find(r.moment);
        if (it != moments_.end()) {
            x.moment = it->second;
        } else {
            warn("unknown-moment", "x record names moment " + std::to_string(r.moment) + ", which no h record began");
        }
    }
    x.compile_pending = r.compile_pending;
    x.capturing = r.capturing;
    x.events_before = event_count();
    report_.oom_contexts.push_back(std::move(x));
}

void Parser::apply(const rec::MomentEnd& r) {
    Moment* m = open_moment(moments_, report_.moments, r.moment);
    if (m == nullptr) {
        warn("unknown-moment", "k record ends moment " + std::to_string(r.moment) + ", which is not open; ignored");
        return;
    }
    m->ended = true;
    m->t_end = r.t;
    // A moment whose counts disagree with the records read lost some of them: partial.
    m->complete = r.complete && r.tensors == m->tags.size() && r.blocks == m->blocks.size();
}

}  // namespace memguard::report

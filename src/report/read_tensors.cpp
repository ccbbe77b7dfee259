// The reader's allocator-mode records (docs/report-format.md, minor 5): T, t, O, o. The writer's
// side is track/records_tensors.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::TensorAlloc& r) {
    Tensor x;
    x.t_alloc = r.t;
    x.tid = r.tid;
    x.addr = r.addr;
    x.size = r.size;
    x.requested = r.requested;
    x.device = r.device;
    x.stream = r.stream;
    x.stack_id = r.stack_id;
    x.python_stack_id = r.python_stack_id;
    x.capture_id = r.capture_id;
    x.pool = std::string(r.pool);
    // The block size is the request rounded up; a file saying otherwise still has usable sizes.
    if (x.requested > x.size) {
        warn("requested-over-size", "tensor block at " + hex(x.addr) + ": requested size " +
                                        std::to_string(x.requested) + " exceeds block size " + std::to_string(x.size));
    }
    check_stack_ref(x.stack_id, "T");
    check_capture_ref(x.capture_id, "T");
    check_python_stack_ref(x.python_stack_id, "T");
    size_t index = report_.tensors.size();
    auto old = live_tensors_.find(x.addr);
    if (old != live_tensors_.end()) {
        warn("tensor-double-alloc", "tensor block at " + hex(x.addr) +
                                        ", which is already live; the earlier block is "
                                        "taken as freed (a t record is missing)");
        report_.tensors[old->second].t_free = x.t_alloc;
        add_event(Event::TensorFree, old->second, x.t_alloc);
    }
    live_tensors_[x.addr] = index;
    report_.tensors.push_back(std::move(x));
    add_event(Event::TensorAlloc, index, report_.tensors.back().t_alloc);
}

void Parser::apply(const rec::TensorFree& r) {
    auto it = live_tensors_.find(r.addr);
    if (it == live_tensors_.end()) {
        warn("tensor-free-not-live", "tensor free of " + hex(r.addr) + ", which is not live; ignored");
        return;
    }
    size_t index = it->second;
    live_tensors_.erase(it);
    Tensor& x = report_.tensors[index];
    x.t_free = r.t;
    x.free_tid = r.tid;
    x.freed_in_gc = r.gc;
    if (r.gc) gc_frees_[r.tid].push_back(index);
    add_event(Event::TensorFree, index, r.t);
}

void Parser::apply(const rec::TensorOom& r) {
    TensorOom o;
    o.t = r.t;
    o.tid = r.tid;
    o.device = r.device;
    o.requested = r.requested;
    o.rounded = r.rounded;
    o.allocated = r.allocated;
    o.reserved = r.reserved;
    o.limit = r.limit;
    o.stack_id = r.stack_id;
    o.python_stack_id = r.python_stack_id;
    o.rescued = format::rescue_name(r.rescued);
    check_stack_ref(o.stack_id, "O");
    check_python_stack_ref(o.python_stack_id, "O");
    report_.tensor_ooms.push_back(std::move(o));
}

void Parser::apply(const rec::TensorOomSite& r) {
    OomSite s;
    s.stack_id = r.stack_id;
    s.python_stack_id = r.python_stack_id;
    s.blocks = r.blocks;
    s.bytes = r.bytes;
    if (report_.tensor_ooms.empty() || report_.tensor_ooms.back().t != r.t) {
        malformed("no O record at t=" + field_text(1, std::to_string(r.t)) + " precedes it");
    }
    check_stack_ref(s.stack_id, "o");
    check_python_stack_ref(s.python_stack_id, "o");
    report_.tensor_ooms.back().sites.push_back(s);
}

}  // namespace memguard::report

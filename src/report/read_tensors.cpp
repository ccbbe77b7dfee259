// The reader's allocator-mode records (docs/report-format.md, minor 5): T, t, O, o. The writer's
// side is track/records_tensors.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::TensorAlloc& r) {
    if (carrying_) {  // a detail part's live set after a gap: the tensors the reader has are kept
        const size_t* at = live_tensors_.find(r.addr);
        if (at != nullptr && report_.tensors[*at].t_alloc == r.t) return;
    }
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
    x.order = next_order(true);
    if (backward_) backward_->add(report_, x.t_alloc, true, x.order, x.tid, x.size, x.stack_id, x.python_stack_id);
    if (const size_t* found = live_tensors_.find(x.addr)) {
        const size_t old = *found;
        warn("tensor-double-alloc", "tensor block at " + hex(x.addr) +
                                        ", which is already live; the earlier block is "
                                        "taken as freed (a t record is missing)");
        report_.tensors[old].t_free = x.t_alloc;
        add_event(Event::TensorFree, old, x.t_alloc);
        if (report_.streamed) release_tensor_slot(old);
    }
    size_t index = 0;
    if (report_.streamed) {
        index = take_tensor_slot();
        report_.tensors[index] = std::move(x);
    } else {
        index = report_.tensors.size();
        report_.tensors.push_back(std::move(x));
    }
    live_tensors_[report_.tensors[index].addr] = index;
    add_event(Event::TensorAlloc, index, report_.tensors[index].t_alloc);
}

void Parser::apply(const rec::TensorFree& r) {
    const size_t* it = live_tensors_.find(r.addr);
    if (it == nullptr) {
        warn("tensor-free-not-live", "tensor free of " + hex(r.addr) + ", which is not live; ignored");
        return;
    }
    const size_t index = *it;
    live_tensors_.erase(r.addr);
    Tensor& x = report_.tensors[index];
    x.t_free = r.t;
    x.free_tid = r.tid;
    x.freed_in_gc = r.gc;
    // A streamed report keeps no freed tensor for its collection (Tensor::collection) to name.
    if (r.gc && !report_.streamed) gc_frees_[r.tid].push_back(index);
    add_event(Event::TensorFree, index, r.t);
    if (report_.streamed) release_tensor_slot(index);
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

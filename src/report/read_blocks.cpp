// The reader's block records (docs/report-format.md, minor 0): A, F, R, E. The writer's side is
// track/records_blocks.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::Alloc& r) {
    Block b;
    b.t_alloc = r.t;
    b.tid = r.tid;
    b.addr = r.addr;
    b.size = r.size;
    b.kind = r.kind;
    b.api = std::string(r.api);
    b.device = r.device;
    b.stream = r.stream;
    b.stack_id = r.stack_id;
    b.capture_id = r.capture_id;            // 0 before minor 1
    b.python_stack_id = r.python_stack_id;  // 0 before minor 2
    check_stack_ref(b.stack_id, "A");
    check_capture_ref(b.capture_id, "A");
    check_python_stack_ref(b.python_stack_id, "A");
    b.order = blocks_read_++;
    if (backward_) backward_->add(report_, b.t_alloc, false, b.order, b.tid, b.size, b.stack_id, b.python_stack_id);
    if (const size_t* old = live_.find(b.addr)) {
        warn("double-alloc", "allocation at " + hex(b.addr) +
                                 ", which is already live; the earlier block is "
                                 "taken as freed (a free was not recorded)");
        const size_t prev_index = *old;
        Block& prev = report_.blocks[prev_index];
        prev.t_free = b.t_alloc;
        prev.free_api = "(implicit)";
        add_event(Event::Free, prev_index, b.t_alloc);
        if (report_.streamed) release_block_slot(prev_index);
    }
    // A block freed at this address can no longer be revived (R): a streamed report lets its slot go.
    if (const Freed* freed = freed_.find(b.addr)) forget_freed(b.addr, *freed);
    size_t index = 0;
    if (report_.streamed) {
        index = take_block_slot();
        report_.blocks[index] = std::move(b);
    } else {
        index = report_.blocks.size();
        report_.blocks.push_back(std::move(b));
    }
    live_[report_.blocks[index].addr] = index;
    add_event(Event::Alloc, index, report_.blocks[index].t_alloc);
}

void Parser::apply(const rec::Free& r) {
    const size_t* it = live_.find(r.addr);
    if (it == nullptr) {
        warn("free-not-live", "free of " + hex(r.addr) + ", which is not live; ignored");
        return;
    }
    const size_t index = *it;
    live_.erase(r.addr);
    Block& b = report_.blocks[index];
    b.t_free = r.t;
    b.free_api = std::string(r.api);
    b.free_tid = r.tid;
    add_event(Event::Free, index, r.t);
    // Kept until the address is allocated again, for an R that revives it (a streamed report keeps
    // the block in its slot until then).
    note_free(r.addr, index);
}

void Parser::note_free(uint64_t addr, size_t block) {
    const uint64_t seq = frees_++;
    freed_[addr] = Freed{block, seq};
    if (recent_frees_.size() < kRestoreWindow) {
        recent_frees_.emplace_back(addr, seq);
        return;
    }
    auto& oldest = recent_frees_[seq % kRestoreWindow];
    const Freed* it = freed_.find(oldest.first);
    if (it != nullptr && it->seq == oldest.second) forget_freed(oldest.first, *it);
    oldest = {addr, seq};
}

void Parser::forget_freed(uint64_t addr, const Freed& f) {
    if (report_.streamed) release_block_slot(f.block);
    freed_.erase(addr);
}

void Parser::apply(const rec::Restore& r) {
    const Freed* it = freed_.find(r.addr);
    if (it == nullptr || live_.contains(r.addr)) {
        warn("restore-not-freed", "failed free of " + hex(r.addr) + ", which no earlier free released; ignored");
        return;
    }
    const size_t index = it->block;
    freed_.erase(r.addr);
    live_[r.addr] = index;
    report_.blocks[index].t_free.reset();
    report_.blocks[index].free_api.clear();
    report_.blocks[index].free_tid = 0;
    add_event(Event::Restore, index, r.t);
}

void Parser::apply(const rec::Failure& r) {
    FailedAlloc e;
    e.t = r.t;
    e.tid = r.tid;
    e.size = r.size;
    e.kind = r.kind;
    e.api = std::string(r.api);
    e.device = r.device;
    e.stream = r.stream;
    e.stack_id = r.stack_id;
    e.error = r.error;
    e.live_bytes = r.live_bytes;
    e.python_stack_id = r.python_stack_id;  // 0 before minor 2
    check_stack_ref(e.stack_id, "E");
    check_python_stack_ref(e.python_stack_id, "E");
    report_.failures.push_back(std::move(e));
}

}  // namespace memguard::report

// The reader's block records (docs/report-format.md, minor 0): A, F, R, E. The writer's side is
// track/records_blocks.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::Alloc& r) {
    if (carrying_) {  // a detail part's live set after a gap: the blocks the reader has are kept
        const AtAddr* at = blocks_at_.find(r.addr);
        if (at != nullptr && at->live && report_.blocks[at->block].t_alloc == r.t) return;
    }
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
    b.order = next_order(false);
    if (backward_) backward_->add(report_, b.t_alloc, false, b.order, b.tid, b.size, b.stack_id, b.python_stack_id);
    const uint64_t addr = b.addr;
    const int64_t t = b.t_alloc;
    if (AtAddr* at = blocks_at_.find(addr); at != nullptr && at->live) {
        warn("double-alloc", "allocation at " + hex(addr) +
                                 ", which is already live; the earlier block is "
                                 "taken as freed (a free was not recorded)");
        const size_t prev_index = at->block;
        Block& prev = report_.blocks[prev_index];
        prev.t_free = t;
        prev.free_api = "(implicit)";
        add_event(Event::Free, prev_index, t);
        if (report_.streamed) release_block_slot(prev_index);
    } else if (at != nullptr) {
        forget_freed(*at);  // a block freed at this address can no longer be revived (R)
    }
    size_t index = 0;
    if (report_.streamed) {
        index = take_block_slot();
        report_.blocks[index] = std::move(b);
    } else {
        index = report_.blocks.size();
        report_.blocks.push_back(std::move(b));
    }
    blocks_at_[addr] = AtAddr{index, 0, true};
    add_event(Event::Alloc, index, t);
}

void Parser::apply(const rec::Free& r) {
    AtAddr* at = blocks_at_.find(r.addr);
    if (at == nullptr || !at->live) {
        warn("free-not-live", "free of " + hex(r.addr) + ", which is not live; ignored");
        return;
    }
    const size_t index = at->block;
    Block& b = report_.blocks[index];
    b.t_free = r.t;
    b.free_api = std::string(r.api);
    b.free_tid = r.tid;
    add_event(Event::Free, index, r.t);
    // Kept until the address is allocated again, for an R that revives it (a streamed report keeps
    // the block in its slot until then).
    note_free(r.addr, *at);
}

void Parser::note_free(uint64_t addr, AtAddr& at) {
    const uint64_t seq = frees_++;
    at.live = false;
    at.seq = seq;
    if (recent_frees_.size() < kRestoreWindow) {
        recent_frees_.emplace_back(addr, seq);
        return;
    }
    auto& oldest = recent_frees_[seq % kRestoreWindow];
    // `at` may move from here (erase shifts entries back).
    const AtAddr* old = blocks_at_.find(oldest.first);
    if (old != nullptr && !old->live && old->seq == oldest.second) {
        forget_freed(*old);
        blocks_at_.erase(oldest.first);
    }
    oldest = {addr, seq};
}

void Parser::forget_freed(const AtAddr& at) {
    if (report_.streamed) release_block_slot(at.block);
}

void Parser::apply(const rec::Restore& r) {
    AtAddr* at = blocks_at_.find(r.addr);
    if (at == nullptr || at->live) {
        // An R is a spine record whose event a fold's table of events counts (spine_events_) whether
        // or not it brings a block back. Before a fold's point, where the free it undoes may lie in
        // the folded detail, the whole report counted its event: so does this read, without telling
        // the observers (the block it brings back is the fold's: FoldPoint::uncarried).
        if (!detail_ || !detail_->reading) ++spine_events_;
        if (detail_ && detail_->fold && !detail_->fold_applied) {
            ++events_;
            return;
        }
        warn("restore-not-freed", "failed free of " + hex(r.addr) + ", which no earlier free released; ignored");
        return;
    }
    const size_t index = at->block;
    at->live = true;
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

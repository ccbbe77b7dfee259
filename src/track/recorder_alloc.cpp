// The Recorder's allocator-mode records (docs/report-format.md, minor 5): tensor blocks that
// memguard's own caching allocator hands to PyTorch (T, t) and its out-of-memory events (O, o).
// The segments it takes from the device are ordinary A/F records (record_alloc_interned).
#include "common/text.h"
#include "track/clock.h"
#include "track/line.h"
#include "track/recorder.h"

namespace memguard::track {

void Recorder::set_allocator_mode() {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (allocator_mode_.exchange(true, std::memory_order_acq_rel)) return;
    // A report started before the switch (rare: the switch happens before CUDA is initialized)
    // gets the info record now; write_header() writes it otherwise.
    if (state_.load(std::memory_order_acquire) == State::Recording) {
        Line line('I');
        line.word("allocator").str("memguard");
        writer_.append(line.finish());
    }
}

uint32_t Recorder::intern_stack(const uintptr_t* ips, int n) {
    // The report is started even without a native stack: the Python stack provider, asked next,
    // appends its records to a started report only.
    if (!ensure_started() || n <= 0) return 0;
    return intern(ips, n);
}

void Recorder::record_block_alloc(const TensorBlock& b) {
    if (!ensure_started()) return;
    Line line('T');
    line.sdec(now()).dec(current_tid()).hex(b.addr).dec(b.size).dec(b.requested).sdec(b.device).hex(b.stream);
    line.dec(b.stack_id).dec(b.python_stack_id).dec(b.capture_id);
    if (b.private_pool) {
        char pool[48];
        size_t n = text::put_dec(pool, b.pool_first);
        pool[n++] = '.';
        n += text::put_dec(pool + n, b.pool_second);
        line.word(std::string_view(pool, n));
    } else {
        line.word("-");
    }
    writer_.append(line.finish());
}

void Recorder::record_block_free(uintptr_t addr, bool during_gc) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('t');
    line.sdec(now()).dec(current_tid()).hex(addr).dec(during_gc ? 1 : 0);
    writer_.append(line.finish());
}

void Recorder::record_allocator_oom(const AllocatorOom& oom) {
    if (!ensure_started()) return;
    const int64_t t = now();
    Line line('O');
    line.sdec(t).dec(current_tid()).sdec(oom.device).dec(oom.requested).dec(oom.rounded).dec(oom.allocated);
    line.dec(oom.reserved).dec(oom.limit).dec(oom.stack_id).dec(oom.python_stack_id).word(oom.rescued);
    // One append for the event and its sites, so that no other record lands between them.
    std::string records(line.finish());
    for (size_t i = 0; i < oom.site_count; ++i) {
        const OomSite& s = oom.sites[i];
        Line site('o');
        site.sdec(t).dec(s.stack_id).dec(s.python_stack_id).dec(s.blocks).dec(s.bytes);
        records.append(site.finish());
    }
    writer_.append(records);
}

}  // namespace memguard::track

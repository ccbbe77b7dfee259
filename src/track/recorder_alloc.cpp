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

namespace {

// T and t are written on every tensor allocation and free: the hook packs their numbers and the
// writer thread formats them (ReportWriter::append_packed). The field order is the record's.
// A block of the default pools has no pool fields (the record says "-").
enum TField : uint32_t {
    kTTime, kTTid, kTAddr, kTSize, kTRequested, kTDevice, kTStream, kTStack, kTPyStack, kTCapture,
    kTDefaultPoolCount, kTPoolFirst = kTDefaultPoolCount, kTPoolSecond, kTFieldCount
};
enum FreeField : uint32_t { kFTime, kFTid, kFAddr, kFDuringGc, kFFieldCount };

void format_block_alloc(const uint64_t* f, uint32_t count, std::string& out) {
    Line line('T');
    line.sdec(static_cast<int64_t>(f[kTTime])).dec(f[kTTid]).hex(f[kTAddr]).dec(f[kTSize]).dec(f[kTRequested]);
    line.sdec(static_cast<int64_t>(f[kTDevice])).hex(f[kTStream]);
    line.dec(f[kTStack]).dec(f[kTPyStack]).dec(f[kTCapture]);
    if (count == kTFieldCount) {
        char pool[48];
        size_t n = text::put_dec(pool, f[kTPoolFirst]);
        pool[n++] = '.';
        n += text::put_dec(pool + n, f[kTPoolSecond]);
        line.word(std::string_view(pool, n));
    } else {
        line.word("-");
    }
    out.append(line.finish());
}

void format_block_free(const uint64_t* f, uint32_t, std::string& out) {
    Line line('t');
    line.sdec(static_cast<int64_t>(f[kFTime])).dec(f[kFTid]).hex(f[kFAddr]).dec(f[kFDuringGc]);
    out.append(line.finish());
}

}  // namespace

void Recorder::record_block_alloc(const TensorBlock& b) {
    if (!ensure_started()) return;
    uint64_t f[kTFieldCount];
    f[kTTime] = static_cast<uint64_t>(now());
    f[kTTid] = current_tid();
    f[kTAddr] = b.addr;
    f[kTSize] = b.size;
    f[kTRequested] = b.requested;
    f[kTDevice] = static_cast<uint64_t>(static_cast<int64_t>(b.device));
    f[kTStream] = b.stream;
    f[kTStack] = b.stack_id;
    f[kTPyStack] = b.python_stack_id;
    f[kTCapture] = b.capture_id;
    f[kTPoolFirst] = b.pool_first;
    f[kTPoolSecond] = b.pool_second;
    writer_.append_packed(&format_block_alloc, f, b.private_pool ? kTFieldCount : kTDefaultPoolCount);
}

void Recorder::record_block_free(uintptr_t addr, bool during_gc) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    const uint64_t f[kFFieldCount] = {static_cast<uint64_t>(now()), current_tid(), addr, during_gc ? 1u : 0u};
    writer_.append_packed(&format_block_free, f, kFFieldCount);
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

// The Recorder's allocator-mode records (docs/report-format.md, minor 5): tensor blocks that
// memguard's own caching allocator hands to PyTorch (T, t) and its out-of-memory events (O, o).
// The segments it takes from the device are ordinary A/F records (record_alloc_interned).
#include <cstddef>
#include <cstring>

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

namespace {

// T and t are written on every tensor allocation and free: the hook packs their numbers and the
// writer thread formats them (EventSink::append_packed). A payload is the struct's bytes up to
// its last field in use: a block of the default pools has no pool fields (the record says "-").
// Thread ids fit 32 bits (the kernel's PID_MAX_LIMIT is 2^22).
struct BlockAllocPayload {
    uint64_t stamp, addr, size, requested, stream;
    uint32_t tid, stack, python_stack, capture;
    int32_t device;
    uint32_t unused;
    uint64_t pool_first, pool_second;
};
constexpr uint32_t kDefaultPoolBytes = offsetof(BlockAllocPayload, unused);
constexpr uint32_t kPrivatePoolBytes = sizeof(BlockAllocPayload);

struct BlockFreePayload {
    uint64_t stamp, addr;
    uint32_t tid;
    uint8_t during_gc;
};
constexpr uint32_t kFreeBytes = offsetof(BlockFreePayload, during_gc) + 1;

static_assert(kPrivatePoolBytes <= EventSink::kMaxPackedBytes);

template <typename Payload>
Payload unpack(const unsigned char* bytes, uint32_t n) {
    Payload p{};
    std::memcpy(&p, bytes, n < sizeof p ? n : sizeof p);
    return p;
}

void format_block_alloc(const unsigned char* bytes, uint32_t n, const Clock& clock, std::string& out) {
    const auto f = unpack<BlockAllocPayload>(bytes, n);
    Line line('T');
    line.sdec(clock.time_of_stamp(f.stamp)).dec(f.tid).hex(f.addr).dec(f.size).dec(f.requested);
    line.sdec(f.device).hex(f.stream).dec(f.stack).dec(f.python_stack).dec(f.capture);
    if (n == kPrivatePoolBytes) {
        char pool[48];
        size_t len = text::put_dec(pool, f.pool_first);
        pool[len++] = '.';
        len += text::put_dec(pool + len, f.pool_second);
        line.word(std::string_view(pool, len));
    } else {
        line.word("-");
    }
    out.append(line.finish());
}

void format_block_free(const unsigned char* bytes, uint32_t n, const Clock& clock, std::string& out) {
    const auto f = unpack<BlockFreePayload>(bytes, n);
    Line line('t');
    line.sdec(clock.time_of_stamp(f.stamp)).dec(f.tid).hex(f.addr).dec(f.during_gc);
    out.append(line.finish());
}

}  // namespace

void Recorder::record_block_alloc(const TensorBlock& b) {
    if (!ensure_started()) return;
    BlockAllocPayload f;
    f.stamp = clock_.stamp();
    f.addr = b.addr;
    f.size = b.size;
    f.requested = b.requested;
    f.stream = b.stream;
    f.tid = static_cast<uint32_t>(current_tid());
    f.stack = b.stack_id;
    f.python_stack = b.python_stack_id;
    f.capture = b.capture_id;
    f.device = b.device;
    f.unused = 0;
    f.pool_first = b.pool_first;
    f.pool_second = b.pool_second;
    // Two calls, each with its size known here: the copy into the buffer is inlined.
    if (b.private_pool) {
        writer_.append_packed(&format_block_alloc, &f, kPrivatePoolBytes);
    } else {
        writer_.append_packed(&format_block_alloc, &f, kDefaultPoolBytes);
    }
}

void Recorder::record_block_free(uintptr_t addr, bool during_gc) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    BlockFreePayload f;
    f.stamp = clock_.stamp();
    f.addr = addr;
    f.tid = static_cast<uint32_t>(current_tid());
    f.during_gc = during_gc ? 1 : 0;
    writer_.append_packed(&format_block_free, &f, kFreeBytes);
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

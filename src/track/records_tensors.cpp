// The Recorder's allocator-mode records (docs/report-format.md, minor 5): tensor blocks that
// memguard's own caching allocator hands to PyTorch (T, t) and its out-of-memory events (O, o).
// The segments it takes from the device are ordinary A/F records (record_alloc_interned). The
// reader's side is report/read_tensors.cpp.
#include <cstddef>
#include <cstring>

#include "format/encode.h"
#include "track/clock.h"
#include "track/packed.h"
#include "track/recorder.h"
#include "track/system_clock.h"
#include "track/writer.h"

namespace memguard::track {

void Recorder::set_allocator_mode() {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (allocator_mode_.exchange(true, std::memory_order_acq_rel)) return;
    // A report started before the switch (rare: the switch happens before CUDA is initialized)
    // gets the info record now; write_header() writes it otherwise.
    if (state_.load(std::memory_order_acquire) == State::Recording) {
        emit(format::rec::Info{"allocator", "memguard"});
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

// The packed records in the report's encoding, from the table's T and t records like every other
// record's (track/packed.h).
void format_block_alloc(const unsigned char* bytes, uint32_t n, PackedOut& out) {
    const auto f = unpack<BlockAllocPayload>(bytes, n);
    char pool[48];
    size_t len = 0;
    if (n == kPrivatePoolBytes) {
        len = format::put_dec(pool, f.pool_first);
        pool[len++] = '.';
        len += format::put_dec(pool + len, f.pool_second);
    } else {
        pool[len++] = '-';
    }
    out.record(format::rec::TensorAlloc{out.clock.time_of_stamp(f.stamp), f.tid, f.addr, f.size, f.requested, f.device,
                                        f.stream, f.stack, f.python_stack, f.capture, std::string_view(pool, len)});
}

void format_block_free(const unsigned char* bytes, uint32_t n, PackedOut& out) {
    const auto f = unpack<BlockFreePayload>(bytes, n);
    out.record(format::rec::TensorFree{out.clock.time_of_stamp(f.stamp), f.tid, f.addr, f.during_gc != 0});
}

// The file sink's append_packed is always inlined where it is named directly (the copy of a
// payload whose size is known here): the production recorder calls it so; another sink (a test's)
// through the interface.
[[gnu::always_inline]] inline void append_packed(ReportWriter* file, EventSink& sink, EventSink::PackedFormat format,
                                                 const void* payload, uint32_t bytes) noexcept {
    if (file) {
        file->ReportWriter::append_packed(format, payload, bytes);
    } else {
        sink.append_packed(format, payload, bytes);
    }
}

}  // namespace

void Recorder::record_block_alloc(const TensorBlock& b) {
    if (!ensure_started()) return;
    BlockAllocPayload f;
    f.stamp = system_clock_ ? system_clock_->SystemClock::stamp() : clock_.stamp();
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
        append_packed(file_sink_, writer_, &format_block_alloc, &f, kPrivatePoolBytes);
    } else {
        append_packed(file_sink_, writer_, &format_block_alloc, &f, kDefaultPoolBytes);
    }
}

void Recorder::record_block_free(uintptr_t addr, bool during_gc) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    BlockFreePayload f;
    f.stamp = system_clock_ ? system_clock_->SystemClock::stamp() : clock_.stamp();
    f.addr = addr;
    f.tid = static_cast<uint32_t>(current_tid());
    f.during_gc = during_gc ? 1 : 0;
    append_packed(file_sink_, writer_, &format_block_free, &f, kFreeBytes);
}

void Recorder::record_allocator_oom(const AllocatorOom& oom) {
    if (!ensure_started()) return;
    const int64_t t = now();
    const bool binary = writer_.binary();
    // One append for the event and its sites, so that no other record lands between them.
    std::string records;
    encode_record(binary,
                  format::rec::TensorOom{t, current_tid(), oom.device, oom.requested, oom.rounded, oom.allocated,
                                         oom.reserved, oom.limit, oom.stack_id, oom.python_stack_id, oom.rescued},
                  records);
    for (size_t i = 0; i < oom.site_count; ++i) {
        const OomSite& s = oom.sites[i];
        encode_record(binary, format::rec::TensorOomSite{t, s.stack_id, s.python_stack_id, s.blocks, s.bytes}, records);
    }
    writer_.append(records);
}

}  // namespace memguard::track

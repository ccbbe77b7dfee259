// The Recorder's block records (docs/report-format.md, minor 0): allocations (A), frees (F),
// failed frees (R) and failed allocations (E); the reader's side is report/read_blocks.cpp.
#include <optional>

#include "format/encode.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::track {

namespace {

std::optional<uint64_t> stream_field(StreamArg s) {
    return s.present ? std::optional<uint64_t>(s.handle) : std::nullopt;
}

}  // namespace

void Recorder::record_alloc(Api api, Kind kind, uintptr_t addr, uint64_t size, int device, StreamArg stream,
                            const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    record_alloc_interned(api, kind, addr, size, device, stream, sid, py);
}

void Recorder::record_alloc_interned(Api api, Kind kind, uintptr_t addr, uint64_t size, int device, StreamArg stream,
                                     uint32_t sid, uint32_t py) {
    if (!ensure_started()) return;
    if (is_gpu(kind)) gpu_seen_.store(true, std::memory_order_relaxed);
    int64_t t = now();
    uint64_t tid = current_tid();
    uint32_t owner = captures_.owner_for(stream, tid).id;
    auto replaced = blocks_.insert(addr, LiveBlock{size, sid, kind, device, owner, t});
    if (replaced) {
        // The earlier block at this address was released by a path memguard does not see.
        emit(format::rec::Free{t, tid, addr, replaced->size, format::kUnseenApi, std::nullopt});
    }
    emit(format::rec::Alloc{t, tid, addr, size, kind, format::name_of(api), device, stream_field(stream), sid, owner,
                            py});
}

void Recorder::record_alloc_failed(Api api, Kind kind, uint64_t size, int device, StreamArg stream,
                                   const uintptr_t* ips, int n, int error) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    emit(format::rec::Failure{now(), current_tid(), size, kind, format::name_of(api), device, stream_field(stream), sid,
                              error, blocks_.gpu_live_bytes(device), py});
}

std::optional<LiveBlock> Recorder::record_free(Api api, uintptr_t addr, StreamArg stream) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return std::nullopt;
    auto b = blocks_.remove(addr);
    if (!b) return std::nullopt;
    int64_t t = now();
    uint64_t tid = current_tid();
    if (is_gpu(b->kind) && watched_tid_.load(std::memory_order_relaxed) == tid) {
        watched_freed_.fetch_add(b->size, std::memory_order_relaxed);
    }
    emit(format::rec::Free{t, tid, addr, b->size, format::name_of(api), stream_field(stream)});
    if (b->capture_id != 0) {
        // Freeing a capture's block while a graph exec from it lives lets a later allocation (or
        // capture) alias memory the graph still reads and writes on replay.
        if (uintptr_t exec = graphs_.live_exec_of(b->capture_id)) {
            emit(format::rec::FreeLiveGraph{t, tid, addr, b->size, b->capture_id, exec});
        }
    }
    return b;
}

void Recorder::record_free_failed(uintptr_t addr, const LiveBlock& block, int error) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    const uint64_t tid = current_tid();
    if (is_gpu(block.kind) && watched_tid_.load(std::memory_order_relaxed) == tid) {
        watched_freed_.fetch_sub(block.size, std::memory_order_relaxed);  // the free did not happen
    }
    blocks_.insert(addr, block);
    emit(format::rec::Restore{now(), tid, addr, error});
}

}  // namespace memguard::track

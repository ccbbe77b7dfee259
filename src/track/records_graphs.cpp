// The Recorder's stream capture and CUDA graph records (docs/report-format.md, minor 1): C, c, G,
// L, D, K and the hazards (W); the reader's side is report/read_graphs.cpp.
#include <optional>
#include <unordered_map>

#include "common/log.h"
#include "format/encode.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::track {

namespace {

std::optional<uint64_t> graph_field(uintptr_t graph) { return graph ? std::optional<uint64_t>(graph) : std::nullopt; }

}  // namespace

void Recorder::record_capture_begin(StreamArg stream, CaptureMode mode, uintptr_t target_graph) {
    uint64_t tid = current_tid();
    uint32_t id = captures_.begin(stream, mode, tid);
    if (id == 0) {
        MG_LOG_WARN("more than {} stream captures at once; capture on stream {:#x} is not tracked", CaptureView::kSlots,
                    stream.handle);
        return;
    }
    if (!ensure_started()) return;
    emit(format::rec::CaptureBegin{now(), tid, id, stream.handle, mode, graph_field(target_graph)});
    write_warmup_retention(id, format::CapturePhase::Begin);
}

void Recorder::record_capture_end(StreamArg stream, int error, uintptr_t graph) {
    CaptureInfo c = captures_.end(stream, current_tid());
    if (c.id == 0) return;
    if (graph) graphs_.captured(graph, c.id);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    int64_t t = now();
    emit(format::rec::CaptureEnd{t, current_tid(), c.id, error, graph_field(graph)});
    write_warmup_retention(c.id, format::CapturePhase::End);
    last_capture_end_t_.store(t, std::memory_order_relaxed);
}

void Recorder::write_warmup_retention(uint32_t capture_id, format::CapturePhase phase) {
    struct Site {
        uint64_t blocks = 0, bytes = 0;
    };
    std::unordered_map<uint32_t, Site> sites;
    int64_t since = last_capture_end_t_.load(std::memory_order_relaxed);
    blocks_.for_each([&](uintptr_t, const LiveBlock& b) {
        if (b.capture_id == 0 && is_gpu(b.kind) && b.t_alloc >= since) {
            Site& s = sites[b.stack_id];
            s.blocks += 1;
            s.bytes += b.size;
        }
    });
    int64_t t = now();
    uint64_t tid = current_tid();
    for (const auto& [stack_id, site] : sites) {
        emit(format::rec::WarmupRetention{t, tid, capture_id, phase, since, stack_id, site.blocks, site.bytes});
    }
}

void Recorder::record_instantiate(uintptr_t exec, uintptr_t graph) {
    uint32_t capture = graphs_.instantiated(exec, graph);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    emit(format::rec::Instantiate{now(), current_tid(), exec, graph, capture});
}

void Recorder::record_launch(uintptr_t exec, uintptr_t stream) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    emit(format::rec::Launch{now(), current_tid(), exec, stream});
}

void Recorder::record_exec_destroy(uintptr_t exec) {
    graphs_.exec_destroyed(exec);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    emit(format::rec::ExecDestroy{now(), current_tid(), exec});
}

void Recorder::record_graph_destroy(uintptr_t graph) {
    graphs_.graph_destroyed(graph);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    emit(format::rec::GraphDestroy{now(), current_tid(), graph});
}

void Recorder::check_unsafe_call(Api api) {
    if (captures_.active() == 0) return;
    uint64_t tid = current_tid();
    CaptureMode mode = thread_capture_mode();
    CaptureInfo c = captures_.prohibiting(tid, mode);
    if (c.id == 0 || !ensure_started()) return;
    emit(format::rec::UnsafeCall{now(), tid, format::name_of(api), c.id, c.mode, mode});
}

}  // namespace memguard::track

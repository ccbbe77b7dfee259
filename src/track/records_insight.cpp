// The Recorder's insight records (minor 8): steps (s), moments (h, g, d, k) and out-of-memory
// contexts (x), all made by the Python hook with the GIL held, never on the hook path. The
// reader's side is report/read_insight.cpp.
#include "format/encode.h"
#include "track/recorder.h"

namespace memguard::track {

void Recorder::record_step(uint32_t index, format::StepSource source, std::string_view name) {
    if (!active()) return;
    emit_or_defer(format::rec::Step{now(), current_tid(), index, source, cut_phase_name(name)});
}

uint32_t Recorder::record_moment_begin(format::MomentReason reason, uint32_t steps_done) {
    if (!active()) return 0;
    // A moment describes CUDA memory: without a report there is none, except at an out-of-memory
    // (a process whose first allocation failed).
    if (reason == format::MomentReason::Oom ? !ensure_started() : !recording()) return 0;
    uint32_t id = next_moment_.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_moment_.fetch_add(1, std::memory_order_relaxed);  // 2^32 moments later
    emit(format::rec::MomentBegin{now(), current_tid(), id, reason, steps_done});
    return id;
}

void Recorder::record_tensor_tag(const format::rec::TensorTag& g) {
    if (g.moment == 0 || !recording()) return;
    emit(g);
}

void Recorder::record_allocator_block(const format::rec::AllocatorBlock& d) {
    if (d.moment == 0 || !recording()) return;
    emit(d);
}

void Recorder::record_moment_end(uint32_t moment, uint64_t tensors, uint64_t blocks, bool complete) {
    if (moment == 0 || !recording()) return;
    emit(format::rec::MomentEnd{now(), moment, tensors, blocks, complete});
}

void Recorder::record_oom_context(format::rec::OomContext x) {
    if (!active() || !ensure_started()) return;
    x.t = now();
    x.tid = current_tid();
    emit(x);
}

}  // namespace memguard::track

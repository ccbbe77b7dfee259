// The Recorder's cycles records (minor 9): what one of memguard's collections found in its garbage
// (j, u, y, r), made by the Python hook inside the collection with the GIL held, never on the hook
// path. The reader's side is report/read_cycles.cpp.
#include "format/encode.h"
#include "track/recorder.h"

namespace memguard::track {

uint32_t Recorder::record_explanation(uint64_t objects, uint64_t tensors, uint64_t cuda_bytes, int64_t analysis_ns,
                                      bool complete) {
    if (!active() || !ensure_started()) return 0;
    uint32_t id = next_explanation_.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_explanation_.fetch_add(1, std::memory_order_relaxed);  // 2^32 explanations later
    emit(format::rec::Explanation{now(), current_tid(), id, objects, tensors, cuda_bytes, analysis_ns, complete});
    return id;
}

void Recorder::record_garbage_group(const format::rec::GarbageGroup& u) {
    if (u.explain == 0 || !recording()) return;
    emit(u);
}

void Recorder::record_garbage_tensor(const format::rec::GarbageTensor& y) {
    if (y.explain == 0 || !recording()) return;
    emit(y);
}

void Recorder::record_chain_step(const format::rec::ChainStep& r) {
    if (r.explain == 0 || !recording()) return;
    emit(r);
}

}  // namespace memguard::track

// The Recorder's in-process statistics (memguard_stats, the Python module's stats()): live and
// peak GPU bytes from the block table's counters, allocator mode's tensor counters through the
// injected TensorCounters, and the totals of the garbage collections recorded.
#include "track/recorder.h"

namespace memguard::track {

Recorder::Stats Recorder::stats(int device) const {
    Stats s;
    if (device < 0) {
        for (int d = 0; d < BlockTable::kMaxDevices; ++d) {
            s.gpu_live += blocks_.gpu_live_bytes(d);
            s.gpu_peak += blocks_.gpu_peak_bytes(d);
        }
    } else {
        s.gpu_live = blocks_.gpu_live_bytes(device);
        s.gpu_peak = blocks_.gpu_peak_bytes(device);
    }
    const TensorCounters* tensors = tensor_counters_.load(std::memory_order_acquire);
    if (tensors && tensors->read && allocator_mode_.load(std::memory_order_acquire)) {
        s.tensors = true;
        tensors->read(device, &s.tensor_live, &s.tensor_peak);
    }
    s.gc_collections = gc_collections_.load(std::memory_order_relaxed);
    s.gc_freeing_collections = gc_freeing_collections_.load(std::memory_order_relaxed);
    s.gc_cuda_bytes_freed = gc_cuda_bytes_freed_.load(std::memory_order_relaxed);
    return s;
}

void Recorder::reset_peak(int device) {
    if (device < 0) {
        for (int d = 0; d < BlockTable::kMaxDevices; ++d) blocks_.reset_gpu_peak(d);
    } else {
        blocks_.reset_gpu_peak(device);
    }
    const TensorCounters* tensors = tensor_counters_.load(std::memory_order_acquire);
    if (tensors && tensors->reset_peak && allocator_mode_.load(std::memory_order_acquire)) tensors->reset_peak(device);
}

}  // namespace memguard::track

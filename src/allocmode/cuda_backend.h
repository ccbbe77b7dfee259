// The allocator core's device backend over the real CUDA runtime (MEMGUARD_ALLOCATOR=memguard).
// Every function is the real one, found at run time like the hooks' (cuda/real.h): memguard never links
// cudart and never calls its own hooks from here. The segments it obtains are recorded as A/F
// records (kind device, api cudaMalloc) with the stacks of the tensor allocation that made the
// pool grow, which the caller sets for the calling thread (SegmentContext).
#pragma once

#include <cstdint>

#include "alloc/backend.h"
#include "track/recorder.h"

namespace memguard::allocmode {

/// The allocation being served on this thread: what a segment allocated for it is recorded with.
struct SegmentContext {
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    uintptr_t stream = 0;
    bool record = false;
};

/// Sets the calling thread's context for its lifetime and restores the previous one (an
/// allocation made by the out-of-memory rescue's collection nests inside another).
class SegmentContextScope {
public:
    explicit SegmentContextScope(const SegmentContext& ctx) noexcept;
    ~SegmentContextScope();
    SegmentContextScope(const SegmentContextScope&) = delete;
    SegmentContextScope& operator=(const SegmentContextScope&) = delete;

private:
    SegmentContext saved_;
};

class CudaBackend final : public alloc::DeviceBackend {
public:
    /// `recorder`: where the segments' A/F records go, and whose capture view says whether any
    /// capture is in progress.
    explicit CudaBackend(track::Recorder& recorder) noexcept : rec_(recorder) {}

    int segment_malloc(int device, size_t size, void** ptr) override;
    int segment_free(int device, void* ptr) override;
    int mem_info(int device, size_t* free_bytes, size_t* total_bytes) override;
    int event_create(int device, alloc::Event* event) override;
    int event_destroy(int device, alloc::Event event) override;
    int event_record(int device, alloc::Event event, alloc::Stream stream) override;
    int event_query(int device, alloc::Event event) override;
    int event_synchronize(int device, alloc::Event event) override;
    bool stream_capturing(int device, alloc::Stream stream) override;
    bool any_capture_active(int device) override;
    int exchange_capture_mode(int* mode) override;

private:
    track::Recorder& rec_;
};

/// cudaGetDeviceCount through the real runtime; 0 when there is none.
int real_device_count() noexcept;

}  // namespace memguard::allocmode

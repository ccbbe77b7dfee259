// The allocator core's device backend over the real CUDA runtime and driver
// (MEMGUARD_ALLOCATOR=memguard). Every function is the real one, found at run time like the hooks'
// (cuda/real.h): memguard never links cudart or libcuda and never calls its own hooks from here.
// The segments it obtains are recorded as A/F records (kind device, api cudaMalloc), and the
// driver's virtual memory calls of expandable segments as the hooks record them (V/v, N/n, Q/q),
// with the stacks of the tensor allocation that made the pool grow, which the caller sets for the
// calling thread (SegmentContext).
#pragma once

#include <cstdint>
#include <mutex>

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

/// The calling thread's current device (the real cudaGetDevice); 0 when it cannot say.
int current_device() noexcept;

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
    int total_memory(int device, size_t* bytes) override;
    int vmm_granularity(int device, size_t* bytes) override;
    int vmm_reserve(int device, size_t size, uintptr_t* va) override;
    int vmm_address_free(int device, uintptr_t va, size_t size) override;
    int vmm_create(int device, size_t size, alloc::PhysHandle* handle) override;
    int vmm_release(int device, alloc::PhysHandle handle) override;
    int vmm_map(int device, uintptr_t va, size_t size, alloc::PhysHandle handle) override;
    int vmm_set_access(int device, uintptr_t va, size_t size) override;
    int vmm_unmap(int device, uintptr_t va, size_t size) override;
    int stream_synchronize(int device, alloc::Stream stream) override;

private:
    track::Recorder& rec_;
};

/// The virtual-memory order lock of the driver hooks (runtime/fork.h): reserves and creates are
/// made under it, address frees and releases made and recorded under it, so that the report keeps
/// a freed value's v/n before its reuse's V/N whichever of the hooks and this backend made them.
/// Set once at start-up; without it (tests) nothing is locked.
void set_vmm_order_lock(std::mutex* lock) noexcept;

/// cudaGetDeviceCount through the real runtime; 0 when there is none.
int real_device_count() noexcept;

}  // namespace memguard::allocmode

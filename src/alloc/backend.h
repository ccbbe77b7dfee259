// The allocator core's only view of the device: segments, events, capture state and the thread
// capture mode. The real backend (CUDA runtime, resolved at run time by the interpose layer) and
// the fake one used by the tests (alloc/testing/fake_backend.h) implement it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memguard::alloc {

/// A cudaStream_t value (0 is the legacy default stream). The core only compares streams.
using Stream = uintptr_t;
/// A cudaEvent_t value.
using Event = uintptr_t;
/// A CUmemGenericAllocationHandle value (physical memory of the driver's virtual memory calls).
using PhysHandle = uint64_t;

/// Error codes are the CUDA runtime's (cudaError_t values), so that the real backend can return
/// what the runtime returned and the bridge can hand it on unchanged.
enum : int {
    kSuccess = 0,                         // cudaSuccess
    kErrorMemoryAllocation = 2,           // cudaErrorMemoryAllocation
    kErrorNotReady = 600,                 // cudaErrorNotReady
    kErrorNotSupported = 801,             // cudaErrorNotSupported (CUDA_ERROR_NOT_SUPPORTED)
    kErrorStreamCaptureUnsupported = 900  // cudaErrorStreamCaptureUnsupported
};

/// cudaStreamCaptureMode values.
enum : int { kCaptureModeGlobal = 0, kCaptureModeThreadLocal = 1, kCaptureModeRelaxed = 2 };

/// Everything the core calls on the device. The core calls these with its per-device lock held,
/// so an implementation must never call back into the allocator or take a lock that a thread
/// holding an allocator lock could wait for (the GIL in particular).
///
/// Capture rules the core obeys, which a backend may check (the fake does):
///  - event_query / event_synchronize / segment_free are never called while a capture the core
///    knows of is in progress (they are not capture-safe);
///  - event_record is never called on a capturing stream;
///  - segment_malloc during a capture runs with the thread in relaxed capture mode.
///  - of the virtual memory calls, vmm_reserve / vmm_create / vmm_map / vmm_set_access during a
///    capture run in relaxed capture mode too, and so do the vmm_unmap / vmm_release that undo a
///    mapping that failed half-way (of pages nothing used); memory in use is unmapped only after
///    stream_synchronize, and neither that nor vmm_address_free is called while a capture the core
///    knows of is in progress.
class DeviceBackend {
public:
    virtual ~DeviceBackend() = default;

    /// cudaMalloc on `device`. Returns kSuccess or the runtime's error
    /// (kErrorMemoryAllocation when the device is full).
    virtual int segment_malloc(int device, size_t size, void** ptr) = 0;
    /// cudaFree of a pointer segment_malloc returned (synchronizes the device).
    virtual int segment_free(int device, void* ptr) = 0;
    /// cudaMemGetInfo for `device`.
    virtual int mem_info(int device, size_t* free_bytes, size_t* total_bytes) = 0;

    /// cudaEventCreateWithFlags(cudaEventDisableTiming) on `device`.
    virtual int event_create(int device, Event* event) = 0;
    virtual int event_destroy(int device, Event event) = 0;
    /// cudaEventRecord(event, stream).
    virtual int event_record(int device, Event event, Stream stream) = 0;
    /// cudaEventQuery: kSuccess when the recorded work completed, kErrorNotReady when not yet.
    virtual int event_query(int device, Event event) = 0;
    virtual int event_synchronize(int device, Event event) = 0;

    /// Whether `stream` is being captured now. Must be capture-safe (the real backend uses
    /// cudaStreamIsCapturing / cudaStreamGetCaptureInfo, which are).
    virtual bool stream_capturing(int device, Stream stream) = 0;
    /// Whether any stream of the process is being captured now, including captures that the
    /// core was not told of through begin_allocate_to_pool. Must be capture-safe and cheap (the
    /// real backend answers from the interpose layer's lock-free capture view).
    virtual bool any_capture_active(int device) = 0;
    /// cudaThreadExchangeStreamCaptureMode: sets the calling thread's mode to *mode and stores
    /// the previous one in *mode.
    virtual int exchange_capture_mode(int* mode) = 0;

    // --- The driver's virtual memory calls, for expandable segments ----------------------------
    // Error codes are the driver's CUresult values, which equal the runtime's for the ones the
    // core tells apart (CUDA_ERROR_OUT_OF_MEMORY == cudaErrorMemoryAllocation == 2). A backend
    // without them keeps these defaults: the core then grows its pools with segment_malloc.

    /// The device's total memory (cuDeviceTotalMem). Capture-safe.
    virtual int total_memory(int device, size_t* bytes) {
        (void)device, (void)bytes;
        return kErrorNotSupported;
    }
    /// cuMemGetAllocationGranularity (minimum) of pinned device memory on `device`.
    virtual int vmm_granularity(int device, size_t* bytes) {
        (void)device, (void)bytes;
        return kErrorNotSupported;
    }
    /// cuMemAddressReserve of `size` bytes (a multiple of the granularity) of address space.
    virtual int vmm_reserve(int device, size_t size, uintptr_t* va) {
        (void)device, (void)size, (void)va;
        return kErrorNotSupported;
    }
    /// cuMemAddressFree of a whole range vmm_reserve returned, nothing mapped in it.
    virtual int vmm_address_free(int device, uintptr_t va, size_t size) {
        (void)device, (void)va, (void)size;
        return kErrorNotSupported;
    }
    /// cuMemCreate of `size` bytes of pinned memory on `device` (a multiple of the granularity).
    /// CUDA_ERROR_OUT_OF_MEMORY (2) when the device is full.
    virtual int vmm_create(int device, size_t size, PhysHandle* handle) {
        (void)device, (void)size, (void)handle;
        return kErrorNotSupported;
    }
    /// cuMemRelease of a handle vmm_create returned.
    virtual int vmm_release(int device, PhysHandle handle) {
        (void)device, (void)handle;
        return kErrorNotSupported;
    }
    /// cuMemMap of the whole handle (`size` bytes, offset 0) at `va`, inside a reserved range.
    virtual int vmm_map(int device, uintptr_t va, size_t size, PhysHandle handle) {
        (void)device, (void)va, (void)size, (void)handle;
        return kErrorNotSupported;
    }
    /// cuMemSetAccess: read-write for `device` on the mapped range [va, va + size).
    virtual int vmm_set_access(int device, uintptr_t va, size_t size) {
        (void)device, (void)va, (void)size;
        return kErrorNotSupported;
    }
    /// cuMemUnmap of [va, va + size): whole mappings only.
    virtual int vmm_unmap(int device, uintptr_t va, size_t size) {
        (void)device, (void)va, (void)size;
        return kErrorNotSupported;
    }
    /// cudaStreamSynchronize(stream) on `device`: unmapping does not wait for the work still
    /// queued on the memory, as cudaFree does.
    virtual int stream_synchronize(int device, Stream stream) {
        (void)device, (void)stream;
        return kErrorNotSupported;
    }
};

}  // namespace memguard::alloc

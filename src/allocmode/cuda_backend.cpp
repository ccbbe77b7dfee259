#include "allocmode/cuda_backend.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>

#include "common/errno_keeper.h"
#include "cuda/real.h"

namespace memguard::allocmode {

namespace {

using cuda::kNoRuntime;
using cuda::RealFunction;

thread_local SegmentContext t_context;

template <typename Fn>
Fn real(RealFunction<Fn>& f) {
    return cuda::real_or_report(f);
}

RealFunction<cudaError_t (*)(void**, size_t)> r_malloc("cudaMalloc");
RealFunction<cudaError_t (*)(void*)> r_free("cudaFree");
RealFunction<cudaError_t (*)(size_t*, size_t*)> r_mem_get_info("cudaMemGetInfo");
RealFunction<cudaError_t (*)(int*)> r_get_device("cudaGetDevice");
RealFunction<cudaError_t (*)(int)> r_set_device("cudaSetDevice");
RealFunction<cudaError_t (*)(int*)> r_device_count("cudaGetDeviceCount");
RealFunction<cudaError_t (*)(cudaEvent_t*, unsigned int)> r_event_create("cudaEventCreateWithFlags");
RealFunction<cudaError_t (*)(cudaEvent_t)> r_event_destroy("cudaEventDestroy");
RealFunction<cudaError_t (*)(cudaEvent_t, cudaStream_t)> r_event_record("cudaEventRecord");
RealFunction<cudaError_t (*)(cudaEvent_t)> r_event_query("cudaEventQuery");
RealFunction<cudaError_t (*)(cudaEvent_t)> r_event_synchronize("cudaEventSynchronize");
RealFunction<cudaError_t (*)(cudaStream_t, cudaStreamCaptureStatus*)> r_is_capturing("cudaStreamIsCapturing");
RealFunction<cudaError_t (*)(cudaStreamCaptureMode*)> r_exchange_mode("cudaThreadExchangeStreamCaptureMode");
RealFunction<cudaError_t (*)()> r_get_last_error("cudaGetLastError");
RealFunction<cudaError_t (*)(cudaStream_t)> r_stream_synchronize("cudaStreamSynchronize");

// The driver's virtual memory calls (expandable segments). None has a _v2 ABI: the names are the
// current functions.
RealFunction<CUresult (*)(CUcontext*)> r_ctx_get_current("cuCtxGetCurrent");
RealFunction<CUresult (*)(size_t*, CUdevice)> r_device_total_mem("cuDeviceTotalMem_v2");
RealFunction<CUresult (*)(int*, CUdevice_attribute, CUdevice)> r_device_get_attribute("cuDeviceGetAttribute");
RealFunction<CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags)> r_granularity(
    "cuMemGetAllocationGranularity");
RealFunction<CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long)> r_address_reserve(
    "cuMemAddressReserve");
RealFunction<CUresult (*)(CUdeviceptr, size_t)> r_address_free("cuMemAddressFree");
RealFunction<CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long)>
    r_mem_create("cuMemCreate");
RealFunction<CUresult (*)(CUmemGenericAllocationHandle)> r_mem_release("cuMemRelease");
RealFunction<CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)> r_mem_map(
    "cuMemMap");
RealFunction<CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t)> r_set_access("cuMemSetAccess");
RealFunction<CUresult (*)(CUdeviceptr, size_t)> r_mem_unmap("cuMemUnmap");

std::atomic<std::mutex*> g_vmm_order{nullptr};

/// The runtime keeps the last error of any failed call as the thread's "last error", which
/// PyTorch reads after kernel launches (C10_CUDA_KERNEL_LAUNCH_CHECK) and reports as a failure of
/// its own. The allocator's expected failures (an event not ready yet, a cudaMalloc that fails
/// before the cache is freed and the call retried, a capture query) must not surface there, so
/// they are cleared, as PyTorch's own allocator does. The program's own earlier error, if any,
/// was already replaced by the failing call.
int cleared(cudaError_t err) noexcept {
    if (err != cudaSuccess) {
        if (auto fn = r_get_last_error.get()) (void)fn();
    }
    return err;
}

}  // namespace

int current_device() noexcept {
    auto get = real(r_get_device);
    int device = 0;
    return get && get(&device) == cudaSuccess ? device : 0;
}

namespace {

/// Makes `device` current for the scope when it is not (cudaMalloc, cudaMemGetInfo and event
/// creation act on the current device). Reads and sets thread state only: capture-safe.
class DeviceGuard {
public:
    explicit DeviceGuard(int device) noexcept {
        auto get = real(r_get_device);
        auto set = real(r_set_device);
        int current = 0;
        if (get && set && get(&current) == cudaSuccess && current != device && set(device) == cudaSuccess) {
            previous_ = current;
        }
    }
    ~DeviceGuard() {
        if (previous_ >= 0) r_set_device.get()(previous_);
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
};

/// The physical memory of expandable segments, as PyTorch creates it: pinned device memory on
/// `device`, exportable as a file descriptor, RDMA-capable where the device supports it with
/// virtual memory.
CUmemAllocationProp physical_prop(int device) noexcept {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    int rdma = 0;
    if (auto attr = real(r_device_get_attribute);
        attr && attr(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, device) == CUDA_SUCCESS &&
        rdma)
        prop.allocFlags.gpuDirectRDMACapable = 1;
    return prop;
}

/// The device current, and a context current on the thread (the driver's address and mapping
/// calls act on it): a thread that never made a runtime call has none, and cudaSetDevice makes
/// the device's primary context current. Thread state only: capture-safe.
class DriverScope {
public:
    explicit DriverScope(int device) noexcept : guard_(device) {
        auto get = real(r_ctx_get_current);
        CUcontext ctx = nullptr;
        if (get && get(&ctx) == CUDA_SUCCESS && ctx == nullptr) {
            if (auto set = real(r_set_device)) set(device);
        }
    }

private:
    DeviceGuard guard_;
};

/// The virtual-memory order lock for a scope, when there is one.
class OrderLock {
public:
    OrderLock() noexcept : mu_(g_vmm_order.load(std::memory_order_acquire)) {
        if (mu_) mu_->lock();
    }
    ~OrderLock() { unlock(); }
    void unlock() noexcept {
        if (mu_) mu_->unlock();
        mu_ = nullptr;
    }
    OrderLock(const OrderLock&) = delete;
    OrderLock& operator=(const OrderLock&) = delete;

private:
    std::mutex* mu_;
};

constexpr int kNoDriver = CUDA_ERROR_NOT_SUPPORTED;  // no libcuda with the call: cudaMalloc'ed segments

}  // namespace

void set_vmm_order_lock(std::mutex* lock) noexcept { g_vmm_order.store(lock, std::memory_order_release); }

SegmentContextScope::SegmentContextScope(const SegmentContext& ctx) noexcept : saved_(t_context) { t_context = ctx; }
SegmentContextScope::~SegmentContextScope() { t_context = saved_; }

int CudaBackend::segment_malloc(int device, size_t size, void** ptr) {
    auto fn = real(r_malloc);
    if (!fn) return kNoRuntime;
    DeviceGuard guard(device);
    cudaError_t err;
    {
        // The runtime's cudaMalloc reaches the driver's cuMemAlloc_v2 through memguard's driver
        // wrapper: inside this scope that wrapper passes through, so the segment is recorded once,
        // below, and a failure is the allocator's to report.
        track::HookScope scope;
        err = fn(ptr, size);
    }
    cleared(err);  // the core frees its cache and retries, or reports the OOM itself
    if (err == cudaSuccess && *ptr && t_context.record) {
        ErrnoKeeper keep_errno;
        rec_.record_alloc_interned(track::Api::cudaMalloc, track::Kind::Device, reinterpret_cast<uintptr_t>(*ptr), size,
                                   device, track::StreamArg{}, t_context.stack_id, t_context.python_stack_id);
    }
    return err;
}

int CudaBackend::segment_free(int device, void* ptr) {
    (void)device;  // cudaFree finds the device from the pointer
    auto fn = real(r_free);
    if (!fn) return kNoRuntime;
    track::Recorder& rec = rec_;
    // Recorded before the real call, like the cudaFree hook: a reuse of the address by another
    // thread is then always written after the free.
    auto block = rec.record_free(track::Api::cudaFree, reinterpret_cast<uintptr_t>(ptr), track::StreamArg{});
    cudaError_t err;
    {
        track::HookScope scope;  // cudaFree's cuMemFree_v2 is not another free (segment_malloc)
        err = fn(ptr);
    }
    if (err != cudaSuccess && block) rec.record_free_failed(reinterpret_cast<uintptr_t>(ptr), *block, err);
    return err;
}

int CudaBackend::mem_info(int device, size_t* free_bytes, size_t* total_bytes) {
    auto fn = real(r_mem_get_info);
    if (!fn) return kNoRuntime;
    DeviceGuard guard(device);
    return fn(free_bytes, total_bytes);
}

int CudaBackend::event_create(int device, alloc::Event* event) {
    auto fn = real(r_event_create);
    if (!fn) return kNoRuntime;
    DeviceGuard guard(device);
    cudaEvent_t e = nullptr;
    cudaError_t err = fn(&e, cudaEventDisableTiming);
    *event = reinterpret_cast<alloc::Event>(e);
    return err;
}

int CudaBackend::event_destroy(int, alloc::Event event) {
    auto fn = real(r_event_destroy);
    return fn ? fn(reinterpret_cast<cudaEvent_t>(event)) : kNoRuntime;
}

int CudaBackend::event_record(int, alloc::Event event, alloc::Stream stream) {
    auto fn = real(r_event_record);
    return fn ? fn(reinterpret_cast<cudaEvent_t>(event), reinterpret_cast<cudaStream_t>(stream)) : kNoRuntime;
}

int CudaBackend::event_query(int, alloc::Event event) {
    auto fn = real(r_event_query);
    return fn ? cleared(fn(reinterpret_cast<cudaEvent_t>(event))) : kNoRuntime;  // cudaErrorNotReady
}

int CudaBackend::event_synchronize(int, alloc::Event event) {
    auto fn = real(r_event_synchronize);
    return fn ? fn(reinterpret_cast<cudaEvent_t>(event)) : kNoRuntime;
}

bool CudaBackend::stream_capturing(int device, alloc::Stream stream) {
    // Every capture passes memguard's hooks: when none is in progress, no runtime call is needed.
    if (!any_capture_active(device)) return false;
    auto fn = real(r_is_capturing);
    if (!fn) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaError_t err = fn(reinterpret_cast<cudaStream_t>(stream), &status);
    cleared(err);
    // The legacy stream while another blocking stream captures: it is part of that capture.
    if (err == cudaErrorStreamCaptureImplicit) return true;
    return err == cudaSuccess && status != cudaStreamCaptureStatusNone;
}

bool CudaBackend::any_capture_active(int) {
    // Every capture begun through the runtime or the driver passes memguard's hooks (preload).
    return rec_.captures().active() > 0;
}

int CudaBackend::exchange_capture_mode(int* mode) {
    auto fn = real(r_exchange_mode);
    if (!fn) return kNoRuntime;
    auto m = static_cast<cudaStreamCaptureMode>(*mode);
    cudaError_t err = fn(&m);
    *mode = static_cast<int>(m);
    return err;
}

// --- the driver's virtual memory calls (expandable segments) -----------------------------------
// Errors are the driver's CUresult values (backend.h). Allocating calls are recorded when the
// allocation being served records; freeing calls always (the recorder writes only while
// recording, and a record naming nothing live is ignored by the reader).

int CudaBackend::total_memory(int device, size_t* bytes) {
    auto fn = real(r_device_total_mem);
    return fn ? fn(bytes, device) : kNoDriver;
}

int CudaBackend::vmm_granularity(int device, size_t* bytes) {
    auto fn = real(r_granularity);
    if (!fn || !r_address_reserve.get() || !r_mem_create.get() || !r_mem_map.get() || !r_set_access.get() ||
        !r_mem_unmap.get() || !r_mem_release.get() || !r_address_free.get())
        return kNoDriver;
    DriverScope scope(device);
    int supported = 0;
    if (auto attr = real(r_device_get_attribute);
        !attr || attr(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != CUDA_SUCCESS ||
        !supported)
        return kNoDriver;
    const CUmemAllocationProp prop = physical_prop(device);
    return fn(bytes, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}

int CudaBackend::vmm_reserve(int device, size_t size, uintptr_t* va) {
    auto fn = real(r_address_reserve);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    CUdeviceptr p = 0;
    CUresult err;
    {
        OrderLock order;  // allocating side: over the call
        err = fn(&p, size, 0, 0, 0);
    }
    *va = static_cast<uintptr_t>(p);
    if (err == CUDA_SUCCESS && t_context.record) {
        ErrnoKeeper keep_errno;
        rec_.record_reserve_interned(*va, size, t_context.stack_id, t_context.python_stack_id);
    }
    return err;
}

int CudaBackend::vmm_address_free(int device, uintptr_t va, size_t size) {
    auto fn = real(r_address_free);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    OrderLock order;  // freeing side: over the call and its record
    CUresult err = fn(static_cast<CUdeviceptr>(va), size);
    if (err == CUDA_SUCCESS) {
        ErrnoKeeper keep_errno;
        rec_.record_address_free(va, size);
    }
    return err;
}

int CudaBackend::vmm_create(int device, size_t size, alloc::PhysHandle* handle) {
    auto fn = real(r_mem_create);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    const CUmemAllocationProp prop = physical_prop(device);
    CUmemGenericAllocationHandle h = 0;
    CUresult err;
    {
        OrderLock order;
        err = fn(&h, size, &prop, 0);
    }
    *handle = static_cast<alloc::PhysHandle>(h);
    if (err == CUDA_SUCCESS && t_context.record) {
        ErrnoKeeper keep_errno;
        rec_.record_create_interned(static_cast<uintptr_t>(h), size, device, t_context.stack_id,
                                    t_context.python_stack_id);
    }
    return err;
}

int CudaBackend::vmm_release(int device, alloc::PhysHandle handle) {
    auto fn = real(r_mem_release);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    OrderLock order;
    CUresult err = fn(static_cast<CUmemGenericAllocationHandle>(handle));
    if (err == CUDA_SUCCESS) {
        ErrnoKeeper keep_errno;
        rec_.record_release(static_cast<uintptr_t>(handle));
    }
    return err;
}

int CudaBackend::vmm_map(int device, uintptr_t va, size_t size, alloc::PhysHandle handle) {
    auto fn = real(r_mem_map);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    CUresult err = fn(static_cast<CUdeviceptr>(va), size, 0, static_cast<CUmemGenericAllocationHandle>(handle), 0);
    if (err == CUDA_SUCCESS && t_context.record) {
        ErrnoKeeper keep_errno;
        rec_.record_map(va, size, 0, static_cast<uintptr_t>(handle));
    }
    return err;
}

int CudaBackend::vmm_set_access(int device, uintptr_t va, size_t size) {
    auto fn = real(r_set_access);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    // The device itself only: PyTorch adds the peers given to its enablePeerAccess, which the
    // pluggable-allocator interface does not forward.
    CUmemAccessDesc desc = {};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return fn(static_cast<CUdeviceptr>(va), size, &desc, 1);
}

int CudaBackend::vmm_unmap(int device, uintptr_t va, size_t size) {
    auto fn = real(r_mem_unmap);
    if (!fn) return kNoDriver;
    DriverScope scope(device);
    // Recorded after the call: maps and unmaps of a segment happen under its device's lock, so
    // a remap of the address is always written after this.
    CUresult err = fn(static_cast<CUdeviceptr>(va), size);
    if (err == CUDA_SUCCESS) {
        ErrnoKeeper keep_errno;
        rec_.record_unmap(va, size);
    }
    return err;
}

int CudaBackend::stream_synchronize(int device, alloc::Stream stream) {
    auto fn = real(r_stream_synchronize);
    if (!fn) return kNoRuntime;
    DeviceGuard guard(device);
    return fn(reinterpret_cast<cudaStream_t>(stream));
}

int real_device_count() noexcept {
    auto fn = real(r_device_count);
    int n = 0;
    if (!fn || fn(&n) != cudaSuccess) return 0;
    return n;
}

}  // namespace memguard::allocmode

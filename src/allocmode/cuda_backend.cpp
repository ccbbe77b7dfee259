#include "allocmode/cuda_backend.h"

#include <cuda_runtime_api.h>

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

}  // namespace

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

int real_device_count() noexcept {
    auto fn = real(r_device_count);
    int n = 0;
    if (!fn || fn(&n) != cudaSuccess) return 0;
    return n;
}

}  // namespace memguard::allocmode

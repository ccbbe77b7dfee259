// The interposed CUDA runtime allocation functions. Each forwards to the real function with the
// caller's exact arguments and returns exactly its result; around the call it records the block.
// Nothing here makes a CUDA call that is illegal during stream capture: the only extra call is
// cudaGetDevice, which reads thread state.
#include "interpose/hook_support.h"
#include "track/recorder.h"

using memguard::interpose::ErrnoKeeper;
using memguard::interpose::stream_arg;
using memguard::track::Api;
using memguard::track::HookScope;
using memguard::track::Kind;
using memguard::track::Recorder;
using memguard::track::StreamArg;

// Per-thread-default-stream variants, declared by cuda_runtime_api.h only under
// CUDA_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream);
}

namespace {

int current_device() {
    static memguard::interpose::RealFunction<cudaError_t (*)(int*)> get_device("cudaGetDevice");
    int device = 0;
    auto fn = get_device.get();
    if (!fn || fn(&device) != cudaSuccess) return 0;
    return device;
}

struct AllocCall {
    Api api;
    Kind kind;
    StreamArg stream;
    uint64_t requested;            // bytes asked for
    const size_t* pitch = nullptr;  // cudaMallocPitch: the block is *pitch * rows bytes
    size_t rows = 1;

    uint64_t size(bool ok) const { return ok && pitch ? *pitch * rows : requested; }
};

/// Runs `call` (the real allocation) and records its outcome. `out` is where the call stores the
/// pointer.
template <typename Call>
cudaError_t allocate(const AllocCall& what, void** out, Call&& call) {
    memguard::interpose::ensure_initialized();
    HookScope scope;
    Recorder& rec = Recorder::instance();
    if (!scope.outermost() || !rec.active()) return call();
    if (memguard::track::is_potentially_unsafe(what.api) && what.requested > 0) {
        ErrnoKeeper keep_errno;
        rec.check_unsafe_call(what.api);
    }
    cudaError_t err = call();
    ErrnoKeeper keep_errno;
    bool ok = err == cudaSuccess;
    if (ok && (out == nullptr || *out == nullptr)) return err;  // zero-byte request: nothing allocated
    uintptr_t ips[Recorder::kStackCapacity];
    int n = rec.capture_stack(ips);
    int device = what.kind == Kind::Pinned ? -1 : current_device();
    if (ok) {
        rec.record_alloc(what.api, what.kind, reinterpret_cast<uintptr_t>(*out), what.size(true), device, what.stream,
                         ips, n);
    } else {
        rec.record_alloc_failed(what.api, what.kind, what.size(false), device, what.stream, ips, n, static_cast<int>(err));
    }
    return err;
}

/// Records the free of ptr, then runs `call` (the real free); a failed free revives the block.
template <typename Call>
cudaError_t release(Api api, void* ptr, StreamArg stream, Call&& call) {
    memguard::interpose::ensure_initialized();
    HookScope scope;
    Recorder& rec = Recorder::instance();
    if (!scope.outermost() || !rec.active() || ptr == nullptr) return call();
    auto block = [&] {
        ErrnoKeeper keep_errno;
        if (memguard::track::is_potentially_unsafe(api)) rec.check_unsafe_call(api);
        return rec.record_free(api, reinterpret_cast<uintptr_t>(ptr), stream);
    }();
    cudaError_t err = call();
    if (err != cudaSuccess && block) {
        ErrnoKeeper keep_errno;
        rec.record_free_failed(reinterpret_cast<uintptr_t>(ptr), *block, static_cast<int>(err));
    }
    return err;
}

}  // namespace

MG_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
    MG_REAL(cudaMalloc, void**, size_t);
    return allocate({Api::cudaMalloc, Kind::Device, {}, size}, devPtr, [&] { return fn(devPtr, size); });
}

MG_EXPORT cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
    MG_REAL(cudaMallocManaged, void**, size_t, unsigned int);
    return allocate({Api::cudaMallocManaged, Kind::Managed, {}, size}, devPtr,
                    [&] { return fn(devPtr, size, flags); });
}

MG_EXPORT cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
    MG_REAL(cudaMallocPitch, void**, size_t*, size_t, size_t);
    // On failure the pitch is not set: the failure reports the bytes the caller asked for.
    return allocate({Api::cudaMallocPitch, Kind::Device, {}, uint64_t{width} * height, pitch, height}, devPtr,
                    [&] { return fn(devPtr, pitch, width, height); });
}

MG_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
    MG_REAL(cudaMallocHost, void**, size_t);
    return allocate({Api::cudaMallocHost, Kind::Pinned, {}, size}, ptr, [&] { return fn(ptr, size); });
}

MG_EXPORT cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    MG_REAL(cudaHostAlloc, void**, size_t, unsigned int);
    return allocate({Api::cudaHostAlloc, Kind::Pinned, {}, size}, pHost, [&] { return fn(pHost, size, flags); });
}

MG_EXPORT cudaError_t cudaFree(void* devPtr) {
    MG_REAL(cudaFree, void*);
    return release(Api::cudaFree, devPtr, {}, [&] { return fn(devPtr); });
}

MG_EXPORT cudaError_t cudaFreeHost(void* ptr) {
    MG_REAL(cudaFreeHost, void*);
    return release(Api::cudaFreeHost, ptr, {}, [&] { return fn(ptr); });
}

// Stream-ordered allocation, in the legacy and per-thread default-stream variants. Both variants
// are the same call apart from what a null stream means, so they share one body.
#define MG_MALLOC_ASYNC(name)                                                                                  \
    MG_EXPORT cudaError_t name(void** devPtr, size_t size, cudaStream_t stream) {                             \
        MG_REAL(name, void**, size_t, cudaStream_t);                                                           \
        return allocate({Api::cudaMallocAsync, Kind::Async, stream_arg(stream, memguard::interpose::is_ptsz(#name)), size}, devPtr,                \
                        [&] { return fn(devPtr, size, stream); });                                            \
    }
#define MG_FREE_ASYNC(name)                                                                \
    MG_EXPORT cudaError_t name(void* devPtr, cudaStream_t stream) {                       \
        MG_REAL(name, void*, cudaStream_t);                                                \
        return release(Api::cudaFreeAsync, devPtr, stream_arg(stream, memguard::interpose::is_ptsz(#name)), [&] { return fn(devPtr, stream); }); \
    }
#define MG_MALLOC_FROM_POOL_ASYNC(name)                                                                  \
    MG_EXPORT cudaError_t name(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {     \
        MG_REAL(name, void**, size_t, cudaMemPool_t, cudaStream_t);                                      \
        return allocate({Api::cudaMallocFromPoolAsync, Kind::Async, stream_arg(stream, memguard::interpose::is_ptsz(#name)), size}, ptr,     \
                        [&] { return fn(ptr, size, pool, stream); });                                    \
    }

MG_MALLOC_ASYNC(cudaMallocAsync)
MG_MALLOC_ASYNC(cudaMallocAsync_ptsz)
MG_FREE_ASYNC(cudaFreeAsync)
MG_FREE_ASYNC(cudaFreeAsync_ptsz)
MG_MALLOC_FROM_POOL_ASYNC(cudaMallocFromPoolAsync)
MG_MALLOC_FROM_POOL_ASYNC(cudaMallocFromPoolAsync_ptsz)

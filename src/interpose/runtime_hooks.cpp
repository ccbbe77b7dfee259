// The interposed CUDA runtime allocation functions. Each forwards to the real function with the
// caller's exact arguments and returns exactly its result; around the call it records the block
// (record_calls.h, shared with the driver hooks). Nothing here makes a CUDA call that is illegal
// during stream capture: the only extra call is cudaGetDevice, which reads thread state.
#include "interpose/hook_support.h"
#include "interpose/record_calls.h"

#include <utility>

using memguard::interpose::stream_arg;
using memguard::track::Api;
using memguard::track::Kind;

// Per-thread-default-stream variants, declared by cuda_runtime_api.h only under
// CUDA_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream);
}

namespace {

int current_device() {
    static memguard::cuda::RealFunction<cudaError_t (*)(int*)> get_device("cudaGetDevice");
    int device = 0;
    auto fn = get_device.get();
    if (!fn || fn(&device) != cudaSuccess) return 0;
    return device;
}

template <typename Call>
cudaError_t allocate(const memguard::interpose::AllocCall& what, void** out, Call&& call) {
    return memguard::interpose::allocate_and_record(what, out, std::forward<Call>(call), current_device);
}

template <typename Call>
cudaError_t release(Api api, void* ptr, memguard::track::StreamArg stream, Call&& call) {
    return memguard::interpose::release_and_record(api, reinterpret_cast<uintptr_t>(ptr), stream,
                                                   std::forward<Call>(call));
}

}  // namespace

MG_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
    MG_REAL(cudaMalloc, void**, size_t);
    return allocate({Api::cudaMalloc, Kind::Device, {}, size}, devPtr, [&] { return fn(devPtr, size); });
}

MG_EXPORT cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
    MG_REAL(cudaMallocManaged, void**, size_t, unsigned int);
    return allocate({Api::cudaMallocManaged, Kind::Managed, {}, size}, devPtr, [&] { return fn(devPtr, size, flags); });
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
#define MG_MALLOC_ASYNC(name)                                                                                        \
    MG_EXPORT cudaError_t name(void** devPtr, size_t size, cudaStream_t stream) {                                    \
        MG_REAL(name, void**, size_t, cudaStream_t);                                                                 \
        return allocate({Api::cudaMallocAsync, Kind::Async, stream_arg(stream, memguard::interpose::is_ptsz(#name)), \
                         size},                                                                                      \
                        devPtr, [&] { return fn(devPtr, size, stream); });                                           \
    }
#define MG_FREE_ASYNC(name)                                                                                 \
    MG_EXPORT cudaError_t name(void* devPtr, cudaStream_t stream) {                                         \
        MG_REAL(name, void*, cudaStream_t);                                                                 \
        return release(Api::cudaFreeAsync, devPtr, stream_arg(stream, memguard::interpose::is_ptsz(#name)), \
                       [&] { return fn(devPtr, stream); });                                                 \
    }
#define MG_MALLOC_FROM_POOL_ASYNC(name)                                                            \
    MG_EXPORT cudaError_t name(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) { \
        MG_REAL(name, void**, size_t, cudaMemPool_t, cudaStream_t);                                \
        return allocate({Api::cudaMallocFromPoolAsync, Kind::Async,                                \
                         stream_arg(stream, memguard::interpose::is_ptsz(#name)), size},           \
                        ptr, [&] { return fn(ptr, size, pool, stream); });                         \
    }

MG_MALLOC_ASYNC(cudaMallocAsync)
MG_MALLOC_ASYNC(cudaMallocAsync_ptsz)
MG_FREE_ASYNC(cudaFreeAsync)
MG_FREE_ASYNC(cudaFreeAsync_ptsz)
MG_MALLOC_FROM_POOL_ASYNC(cudaMallocFromPoolAsync)
MG_MALLOC_FROM_POOL_ASYNC(cudaMallocFromPoolAsync_ptsz)

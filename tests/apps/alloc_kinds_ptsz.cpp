// Part of alloc_kinds, compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (see CMakeLists.txt): here
// cudaMallocAsync, cudaMallocFromPoolAsync and cudaFreeAsync are macros for the runtime's
// cudaMallocAsync_ptsz, cudaMallocFromPoolAsync_ptsz and cudaFreeAsync_ptsz, which is what
// programs built with nvcc --default-stream per-thread call. The log names the API the program
// wrote.
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "alloc_kinds_ptsz.cpp must be compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#include "app_common.h"

APP_FN void* alloc_async_ptsz(size_t size, cudaStream_t stream) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync_ptsz", cudaMallocAsync(&ptr, size, stream), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void* alloc_from_pool_ptsz(size_t size, cudaStream_t stream) {
    cudaMemPool_t pool = nullptr;
    app::expect("cudaDeviceGetDefaultMemPool", cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    void* ptr = nullptr;
    app::expect("cudaMallocFromPoolAsync_ptsz", cudaMallocFromPoolAsync(&ptr, size, pool, stream), cudaSuccess);
    app::log_alloc("cudaMallocFromPoolAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void free_async_ptsz(void* ptr, cudaStream_t stream) {
    app::expect("cudaFreeAsync_ptsz", cudaFreeAsync(ptr, stream), cudaSuccess);
    app::log_free("cudaFreeAsync", ptr, stream, true);
}

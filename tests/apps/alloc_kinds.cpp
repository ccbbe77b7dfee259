// Allocates one block with each of the seven allocating CUDA APIs (and the per-thread default
// stream entry points of the stream-ordered ones) and frees it with the matching free (naming
// streams where the API takes one), makes the calls the runtime rejects (wrong free
// family, double free, unknown pointer, invalid flags, size 0), and leaves a few blocks live at
// exit. Every call's result is checked against the real runtime's documented behaviour, so the
// program exits with k_app_check_failed when an interposer changes a result.
#include "app_common.h"
#include "app_sizes.h"
#include "fake_cuda_control.h"

#include <cstdint>

using namespace app_sizes;

// alloc_kinds_ptsz.cpp: the same stream-ordered calls compiled with
// CUDA_API_PER_THREAD_DEFAULT_STREAM, so that they reach the runtime's _ptsz entry points.
APP_FN void* alloc_async_ptsz(size_t size, cudaStream_t stream);
APP_FN void* alloc_from_pool_ptsz(size_t size, cudaStream_t stream);
APP_FN void free_async_ptsz(void* ptr, cudaStream_t stream);

namespace {

cudaStream_t g_stream_a = nullptr;
cudaStream_t g_stream_b = nullptr;

}  // namespace

APP_FN void* alloc_device(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    return ptr;
}

APP_FN void* alloc_async(size_t size, cudaStream_t stream) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, size, stream), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void* alloc_from_pool(size_t size, cudaStream_t stream) {
    cudaMemPool_t pool = nullptr;
    app::expect("cudaDeviceGetDefaultMemPool", cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    void* ptr = nullptr;
    app::expect("cudaMallocFromPoolAsync", cudaMallocFromPoolAsync(&ptr, size, pool, stream), cudaSuccess);
    app::log_alloc("cudaMallocFromPoolAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void* alloc_managed(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocManaged", cudaMallocManaged(&ptr, size, cudaMemAttachGlobal), cudaSuccess);
    app::log_alloc("cudaMallocManaged", ptr, size, nullptr, false, app::current_device(), __func__);
    return ptr;
}

APP_FN void* alloc_pitch(size_t width, size_t height, size_t* pitch) {
    void* ptr = nullptr;
    app::expect("cudaMallocPitch", cudaMallocPitch(&ptr, pitch, width, height), cudaSuccess);
    app::log_info("pitch", *pitch);
    app::log_alloc("cudaMallocPitch", ptr, *pitch * height, nullptr, false, app::current_device(), __func__);
    return ptr;
}

APP_FN void* alloc_host(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocHost", cudaMallocHost(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMallocHost", ptr, size, nullptr, false, -1, __func__);
    return ptr;
}

APP_FN void* alloc_host_alloc(size_t size, unsigned int flags) {
    void* ptr = nullptr;
    app::expect("cudaHostAlloc", cudaHostAlloc(&ptr, size, flags), cudaSuccess);
    app::log_alloc("cudaHostAlloc", ptr, size, nullptr, false, -1, __func__);
    return ptr;
}

APP_FN void* alloc_on_device1(size_t size) {
    app::expect("cudaSetDevice(1)", cudaSetDevice(1), cudaSuccess);
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, 1, __func__);
    app::expect("cudaSetDevice(0)", cudaSetDevice(0), cudaSuccess);
    return ptr;
}

APP_FN void leak_blocks() {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, k_leak_device), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, k_leak_device, nullptr, false, 0, __func__);
    app::expect("cudaMallocManaged", cudaMallocManaged(&ptr, k_leak_managed, cudaMemAttachHost), cudaSuccess);
    app::log_alloc("cudaMallocManaged", ptr, k_leak_managed, nullptr, false, 0, __func__);
    app::expect("cudaHostAlloc", cudaHostAlloc(&ptr, k_leak_pinned, cudaHostAllocDefault), cudaSuccess);
    app::log_alloc("cudaHostAlloc", ptr, k_leak_pinned, nullptr, false, -1, __func__);
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, k_leak_async, cudaStreamPerThread), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, k_leak_async, cudaStreamPerThread, true, 0, __func__);
}

void free_device(void* ptr) {
    app::expect("cudaFree", cudaFree(ptr), cudaSuccess);
    app::log_free("cudaFree", ptr, nullptr, false);
}

void free_async(void* ptr, cudaStream_t stream) {
    app::expect("cudaFreeAsync", cudaFreeAsync(ptr, stream), cudaSuccess);
    app::log_free("cudaFreeAsync", ptr, stream, true);
}

void free_host(void* ptr) {
    app::expect("cudaFreeHost", cudaFreeHost(ptr), cudaSuccess);
    app::log_free("cudaFreeHost", ptr, nullptr, false);
}

// The memory is real host memory; touching it proves the block is as large as requested.
void touch(void* ptr, size_t size) {
    app::expect("cudaMemset", cudaMemset(ptr, 0x5a, size), cudaSuccess);
    static_cast<unsigned char*>(ptr)[size - 1] = 0xa5;
}

APP_FN void every_kind() {
    void* device = alloc_device(k_device);
    touch(device, k_device);
    void* async = alloc_async(k_async, g_stream_a);
    void* pool = alloc_from_pool(k_pool, g_stream_a);
    void* managed = alloc_managed(k_managed);
    size_t pitch = 0;
    void* pitched = alloc_pitch(k_pitch_width, k_pitch_height, &pitch);
    if (pitch != 1024)
        app::die("cudaMallocPitch pitch", static_cast<cudaError_t>(pitch), static_cast<cudaError_t>(1024));
    void* host = alloc_host(k_host);
    static_cast<unsigned char*>(host)[k_host - 1] = 1;
    void* host_alloc = alloc_host_alloc(k_host_alloc, cudaHostAllocPortable | cudaHostAllocMapped);

    free_device(device);
    free_async(async, g_stream_b);
    free_async(pool, nullptr);
    free_device(managed);
    free_device(pitched);
    free_host(host);
    free_host(host_alloc);
    app::expect("cudaStreamSynchronize", cudaStreamSynchronize(g_stream_b), cudaSuccess);

    void* async_ptsz = alloc_async_ptsz(k_async_ptsz, g_stream_a);
    void* pool_ptsz = alloc_from_pool_ptsz(k_pool_ptsz, g_stream_a);
    free_async_ptsz(async_ptsz, g_stream_b);
    free_async_ptsz(pool_ptsz, g_stream_a);

    int devices = 0;
    app::expect("cudaGetDeviceCount", cudaGetDeviceCount(&devices), cudaSuccess);
    if (devices >= 2) {
        void* on_device1 = alloc_on_device1(k_device1);
        free_device(on_device1);  // freed while device 0 is current
    }
}

APP_FN void misuse() {
    // cudaFree(nullptr) does nothing and succeeds.
    app::expect("cudaFree(nullptr)", cudaFree(nullptr), cudaSuccess);
    app::expect("cudaFreeHost(nullptr)", cudaFreeHost(nullptr), cudaSuccess);

    // Size 0: success and a null pointer.
    void* zero = reinterpret_cast<void*>(uintptr_t{1});
    app::expect("cudaMalloc(0)", cudaMalloc(&zero, 0), cudaSuccess);
    app::log_info("malloc0_null", zero == nullptr ? 1 : 0);

    // A pointer the runtime never returned; the error is the thread's last error until read.
    int not_cuda_memory = 0;
    app::expect("cudaFree(unknown)", cudaFree(&not_cuda_memory), cudaErrorInvalidValue);
    app::expect("cudaPeekAtLastError", cudaPeekAtLastError(), cudaErrorInvalidValue);
    app::expect("cudaGetLastError", cudaGetLastError(), cudaErrorInvalidValue);
    app::expect("cudaGetLastError(again)", cudaGetLastError(), cudaSuccess);

    // The wrong free family fails and leaves the block live; the right one then frees it.
    void* device = alloc_device(k_wrong_free_device);
    app::expect("cudaFreeHost(device)", cudaFreeHost(device), cudaErrorInvalidValue);
    app::expect("cudaGetLastError(free family)", cudaGetLastError(), cudaErrorInvalidValue);
    free_device(device);
    app::expect("cudaFree(double)", cudaFree(device), cudaErrorInvalidValue);

    void* host = alloc_host(k_wrong_free_host);
    app::expect("cudaFree(host)", cudaFree(host), cudaErrorInvalidValue);
    free_host(host);

    // Invalid flags and size 0 are failed allocations that are not out-of-memory.
    void* managed = reinterpret_cast<void*>(uintptr_t{1});
    app::expect("cudaMallocManaged(bad flags)", cudaMallocManaged(&managed, k_bad_managed, 4), cudaErrorInvalidValue);
    app::log_failed("cudaMallocManaged", k_bad_managed, cudaErrorInvalidValue, 0, 0, __func__);
    app::log_info("bad_managed_null", managed == nullptr ? 1 : 0);
    app::expect("cudaMallocManaged(0)", cudaMallocManaged(&managed, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    app::log_failed("cudaMallocManaged", 0, cudaErrorInvalidValue, 0, 0, __func__);

    app::expect("cudaGetLastError(clear)", cudaGetLastError(), cudaErrorInvalidValue);
    app::expect("cudaPeekAtLastError(clear)", cudaPeekAtLastError(), cudaSuccess);
}

int main() {
    app::init_log();
    int version = 0;
    app::expect("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&version), cudaSuccess);
    app::log_info("runtime_version", static_cast<unsigned long long>(version));
    app::expect("cudaStreamCreate", cudaStreamCreate(&g_stream_a), cudaSuccess);
    app::expect("cudaStreamCreate", cudaStreamCreate(&g_stream_b), cudaSuccess);

    every_kind();
    misuse();
    leak_blocks();

    app::expect("cudaDeviceSynchronize", cudaDeviceSynchronize(), cudaSuccess);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(g_stream_a), cudaSuccess);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(g_stream_b), cudaSuccess);
    app::log_info("fake_live_bytes", fakecuda_live_bytes());
    app::log_info("fake_live_pinned_bytes", fakecuda_live_pinned_bytes());
    app::log_info("fake_alloc_count", fakecuda_alloc_count());
    app::log_info("fake_live_count", fakecuda_live_count());
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

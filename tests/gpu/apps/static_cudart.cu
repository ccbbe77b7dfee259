// Driver entry points: a program built with nvcc's default static cudart (nvcc -cudart static). Its runtime is
// inside the executable and reaches the driver through dlopen("libcuda.so.1") + cuGetProcAddress,
// so only memguard's lookup interposition can see its allocations. It also calls the driver API's
// cuMemAllocHost itself, found the same way. Logs every allocation and free:
//   alloc <what> <ptr hex> <bytes>     free <what> <ptr hex>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                \
    do {                                                                           \
        cudaError_t e = (call);                                                    \
        if (e != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

__global__ void fill(float* p, size_t n) {
    size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
    if (i < n) p[i] = 1.0f;
}

static void log_alloc(const char* what, const void* p, size_t bytes) {
    std::printf("alloc %s %llx %zu\n", what, (unsigned long long)(uintptr_t)p, bytes);
}
static void log_free(const char* what, const void* p) {
    std::printf("free %s %llx\n", what, (unsigned long long)(uintptr_t)p);
}

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

/// cuGetProcAddress_v2(name, version), found like the static runtime finds it; null when the
/// driver has no such entry at that version.
static void* driver_entry(const char* name, int version) {
    static GetProcAddress get = [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        return lib ? reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2")) : nullptr;
    }();
    void* p = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!get || get(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
        return nullptr;
    return p;
}

/// The driver API's own pinned allocation, both ABIs (by lookup at 13000 and at 2000).
static void driver_pinned() {
    auto alloc_v2 = reinterpret_cast<CUresult (*)(void**, size_t)>(driver_entry("cuMemAllocHost", 13000));
    auto alloc_v1 = reinterpret_cast<CUresult (*)(void**, unsigned int)>(driver_entry("cuMemAllocHost", 2000));
    auto free_host = reinterpret_cast<CUresult (*)(void*)>(driver_entry("cuMemFreeHost", 13000));
    if (!alloc_v2 || !free_host) {
        std::fprintf(stderr, "cuGetProcAddress_v2 cuMemAllocHost/cuMemFreeHost failed\n");
        std::exit(1);
    }
    // Both live at once, and before the program frees anything: the check finds records by
    // address, so no address may come back.
    void* p = nullptr;
    void* q = nullptr;
    if (alloc_v2(&p, 9 << 16) != CUDA_SUCCESS) std::exit(1);
    log_alloc("cuMemAllocHost", p, 9 << 16);
    if (alloc_v1) {
        // The CUDA 2.0 ABI may be found but no longer served by the driver: then nothing is
        // allocated (and nothing may be recorded).
        CUresult r = alloc_v1(&q, 11 << 12);
        if (r == CUDA_SUCCESS) {
            log_alloc("cuMemAllocHost@2000", q, 11 << 12);
        } else {
            q = nullptr;
            std::printf("info cuMemAllocHost@2000 failed %d\n", static_cast<int>(r));
        }
    } else {
        std::printf("info cuMemAllocHost@2000 not found\n");
    }
    if (free_host(p) != CUDA_SUCCESS) std::exit(1);
    log_free("cuMemFreeHost", p);
    if (q) {
        if (free_host(q) != CUDA_SUCCESS) std::exit(1);
        log_free("cuMemFreeHost", q);
    }
}

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    float *d1, *d2, *async1, *managed;
    void* host;
    void* pinned;
    void* pitched;
    size_t pitch = 0;
    CHECK(cudaMalloc(&d1, 3 << 20));
    log_alloc("cudaMalloc", d1, 3 << 20);
    CHECK(cudaMalloc(&d2, 64 << 20));
    log_alloc("cudaMalloc", d2, 64 << 20);
    CHECK(cudaMallocManaged(&managed, 5 << 20));
    log_alloc("cudaMallocManaged", managed, 5 << 20);
    CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 77));
    log_alloc("cudaMallocPitch", pitched, pitch * 77);
    CHECK(cudaHostAlloc(&host, 1 << 20, cudaHostAllocDefault));
    log_alloc("cudaHostAlloc", host, 1 << 20);
    // CUDA 13's static runtime has no cuMemAllocHost in its driver name table: its cudaMallocHost
    // reaches the driver's cuMemHostAlloc.
    CHECK(cudaMallocHost(&pinned, 5 << 18));
    log_alloc("cudaMallocHost", pinned, 5 << 18);
    CHECK(cudaMallocAsync(&async1, 7 << 20, stream));
    log_alloc("cudaMallocAsync", async1, 7 << 20);
    driver_pinned();
    fill<<<(64 << 18) / 256, 256, 0, stream>>>(d2, size_t{64} << 18);
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFreeAsync(async1, stream));
    log_free("cudaFreeAsync", async1);
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFree(d1));
    log_free("cudaFree", d1);
    CHECK(cudaFree(managed));
    log_free("cudaFree", managed);
    CHECK(cudaFreeHost(host));
    log_free("cudaFreeHost", host);
    CHECK(cudaFreeHost(pinned));
    log_free("cudaFreeHost", pinned);
    CHECK(cudaFree(pitched));
    log_free("cudaFree", pitched);
    // d2 stays live at exit.
    CHECK(cudaStreamDestroy(stream));
    std::printf("done\n");
    return 0;
}

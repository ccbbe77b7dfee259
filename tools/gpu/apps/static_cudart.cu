// Issue 5: a program built with nvcc's default static cudart (nvcc -cudart static). Its runtime is
// inside the executable and reaches the driver through dlopen("libcuda.so.1") + cuGetProcAddress,
// so only memguard's lookup interposition can see its allocations. Logs every allocation and free:
//   alloc <what> <ptr hex> <bytes>     free <what> <ptr hex>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e = (call);                                                              \
        if (e != cudaSuccess) {                                                              \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e));           \
            std::exit(1);                                                                    \
        }                                                                                    \
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

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    float *d1, *d2, *async1, *managed;
    void* host;
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
    CHECK(cudaMallocAsync(&async1, 7 << 20, stream));
    log_alloc("cudaMallocAsync", async1, 7 << 20);
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
    CHECK(cudaFree(pitched));
    log_free("cudaFree", pitched);
    // d2 stays live at exit.
    CHECK(cudaStreamDestroy(stream));
    std::printf("done\n");
    return 0;
}

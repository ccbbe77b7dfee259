// Allocates, frees one block, prints "ready" and waits to be killed with SIGKILL.
#include "app_common.h"
#include "app_sizes.h"

#include <unistd.h>

using namespace app_sizes;

APP_FN void* killed_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, 0, __func__);
    return ptr;
}

APP_FN void* killed_alloc_managed(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocManaged", cudaMallocManaged(&ptr, size, cudaMemAttachGlobal), cudaSuccess);
    app::log_alloc("cudaMallocManaged", ptr, size, nullptr, false, 0, __func__);
    return ptr;
}

APP_FN void* killed_alloc_pinned(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocHost", cudaMallocHost(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMallocHost", ptr, size, nullptr, false, -1, __func__);
    return ptr;
}

APP_FN void* killed_alloc_async(size_t size, cudaStream_t stream) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, size, stream), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, stream, true, 0, __func__);
    return ptr;
}

int main() {
    app::init_log();
    cudaStream_t stream = nullptr;
    app::expect("cudaStreamCreate", cudaStreamCreate(&stream), cudaSuccess);
    killed_alloc(k_killed_device);
    void* managed = killed_alloc_managed(k_killed_managed);
    killed_alloc_pinned(k_killed_pinned);
    killed_alloc_async(k_killed_async, stream);
    app::expect("cudaFree", cudaFree(managed), cudaSuccess);
    app::log_free("cudaFree", managed, nullptr, false);
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    for (;;) pause();
}

// A plugin that uses CUDA, like a Python extension module: it links libcudart itself and is
// loaded by dlopen_local with RTLD_LOCAL, so libcudart is not in the global symbol scope.
#include "app_common.h"
#include "app_sizes.h"

using namespace app_sizes;

APP_FN void* worker_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    return ptr;
}

APP_FN void* worker_alloc_pinned(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocHost", cudaMallocHost(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMallocHost", ptr, size, nullptr, false, -1, __func__);
    return ptr;
}

/// The plugin's entry point, found by dlsym(). Returns 0 on success.
APP_FN int worker_run() {
    void* freed = worker_alloc(k_dl_freed);
    worker_alloc(k_dl_live);
    void* pinned = worker_alloc_pinned(k_dl_pinned);
    app::expect("cudaFree", cudaFree(freed), cudaSuccess);
    app::log_free("cudaFree", freed, nullptr, false);
    app::expect("cudaFreeHost", cudaFreeHost(pinned), cudaSuccess);
    app::log_free("cudaFreeHost", pinned, nullptr, false);
    return 0;
}

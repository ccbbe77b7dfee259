// Runs out of device memory and meets injected failures.
//
//   oom capacity   (run with FAKE_CUDA_CAPACITY=k_oom_capacity, optionally FAKE_CUDA_DEVICES=2)
//       fills device 0 with k_oom_block blocks until cudaMalloc fails, then fails a
//       cudaMallocAsync and a cudaMallocManaged for lack of room, frees one block and meets an
//       injected out-of-memory and an injected non-OOM error; with two devices, also runs out on
//       device 1 while device 0 is still full.
//   oom fail_at    (run with FAKE_CUDA_FAIL_AT=3)
//       makes k_fail_at_calls cudaMalloc calls and logs which ones failed.
#include "app_common.h"
#include "app_sizes.h"
#include "fake_cuda_control.h"

#include <cstring>
#include <vector>

using namespace app_sizes;

namespace {

app::LiveBytes g_live;

struct Block {
    void* ptr;
    size_t size;
    int device;
};

}  // namespace

// Returns the error; logs the block or the failure.
APP_FN cudaError_t oom_malloc(size_t size, std::vector<Block>* blocks) {
    int device = app::current_device();
    void* ptr = nullptr;
    cudaError_t error = cudaMalloc(&ptr, size);
    if (error == cudaSuccess) {
        app::log_alloc("cudaMalloc", ptr, size, nullptr, false, device, __func__);
        g_live.add(device, size);
        blocks->push_back({ptr, size, device});
    } else {
        if (ptr != nullptr) app::die("cudaMalloc left a pointer", error, error);
        app::log_failed("cudaMalloc", size, error, g_live.on(device), device, __func__);
    }
    return error;
}

APP_FN cudaError_t oom_malloc_async(size_t size) {
    int device = app::current_device();
    void* ptr = nullptr;
    cudaError_t error = cudaMallocAsync(&ptr, size, nullptr);
    if (error == cudaSuccess) app::die("cudaMallocAsync beyond capacity", error, cudaErrorMemoryAllocation);
    app::log_failed("cudaMallocAsync", size, error, g_live.on(device), device, __func__);
    return error;
}

APP_FN cudaError_t oom_malloc_managed(size_t size) {
    int device = app::current_device();
    void* ptr = nullptr;
    cudaError_t error = cudaMallocManaged(&ptr, size, cudaMemAttachGlobal);
    if (error == cudaSuccess) app::die("cudaMallocManaged beyond capacity", error, cudaErrorMemoryAllocation);
    app::log_failed("cudaMallocManaged", size, error, g_live.on(device), device, __func__);
    return error;
}

APP_FN cudaError_t oom_malloc_host(size_t size) {
    void* ptr = nullptr;
    cudaError_t error = cudaMallocHost(&ptr, size);
    if (error == cudaSuccess) app::die("cudaMallocHost with an injected failure", error, cudaErrorLaunchFailure);
    app::log_failed("cudaMallocHost", size, error, g_live.on(0), -1, __func__);
    return error;
}

void free_all(std::vector<Block>* blocks) {
    for (const Block& block : *blocks) {
        app::expect("cudaFree", cudaFree(block.ptr), cudaSuccess);
        app::log_free("cudaFree", block.ptr, nullptr, false);
        g_live.remove(block.device, block.size);
    }
    blocks->clear();
}

int run_capacity() {
    std::vector<Block> blocks;
    // Device 0 fills up: 6 blocks of 10 MiB fit in 64 MiB, the 7th does not.
    int successes = 0;
    while (oom_malloc(k_oom_block, &blocks) == cudaSuccess) {
        if (++successes > 1000) app::die("capacity never reached", cudaSuccess, cudaErrorMemoryAllocation);
    }
    app::expect("cudaGetLastError(oom)", cudaGetLastError(), cudaErrorMemoryAllocation);
    app::log_info("blocks_before_oom", static_cast<unsigned long long>(successes));
    // The capacity is shared by all GPU kinds.
    app::expect("cudaMallocAsync(full)", oom_malloc_async(k_oom_block), cudaErrorMemoryAllocation);
    app::expect("cudaMallocManaged(full)", oom_malloc_managed(k_oom_block), cudaErrorMemoryAllocation);

    // Room again, but the runtime is told to fail: an OOM with less memory live.
    Block last = blocks.back();
    blocks.pop_back();
    app::expect("cudaFree", cudaFree(last.ptr), cudaSuccess);
    app::log_free("cudaFree", last.ptr, nullptr, false);
    g_live.remove(last.device, last.size);
    fakecuda_fail_next(1, cudaErrorMemoryAllocation);
    app::expect("cudaMalloc(injected oom)", oom_malloc(k_oom_small, &blocks), cudaErrorMemoryAllocation);
    fakecuda_fail_next(1, k_injected_error);
    app::expect("cudaMallocHost(injected error)", oom_malloc_host(k_oom_small),
                static_cast<cudaError_t>(k_injected_error));
    // And it works again afterwards.
    app::expect("cudaMalloc(after)", oom_malloc(k_oom_small, &blocks), cudaSuccess);

    int devices = 0;
    app::expect("cudaGetDeviceCount", cudaGetDeviceCount(&devices), cudaSuccess);
    if (devices >= 2) {
        // Device 0 stays nearly full; device 1 has its own capacity.
        app::expect("cudaSetDevice(1)", cudaSetDevice(1), cudaSuccess);
        app::expect("cudaMalloc(dev1)", oom_malloc(k_oom_block, &blocks), cudaSuccess);
        app::expect("cudaMalloc(dev1)", oom_malloc(k_oom_block, &blocks), cudaSuccess);
        app::expect("cudaMalloc(dev1 big)", oom_malloc(k_oom_device1_big, &blocks), cudaErrorMemoryAllocation);
        app::expect("cudaSetDevice(0)", cudaSetDevice(0), cudaSuccess);
    }
    free_all(&blocks);
    app::log_info("fake_live_bytes", fakecuda_live_bytes());
    app::log_info("fake_alloc_count", fakecuda_alloc_count());
    return 0;
}

int run_fail_at() {
    std::vector<Block> blocks;
    int failures = 0;
    for (int i = 0; i < k_fail_at_calls; ++i) {
        if (oom_malloc(k_fail_at_block, &blocks) != cudaSuccess) ++failures;
    }
    app::log_info("failures", static_cast<unsigned long long>(failures));
    free_all(&blocks);
    return 0;
}

int main(int argc, char** argv) {
    app::init_log();
    const char* mode = argc > 1 ? argv[1] : "capacity";
    if (std::strcmp(mode, "capacity") == 0) return run_capacity();
    if (std::strcmp(mode, "fail_at") == 0) return run_fail_at();
    std::fprintf(stderr, "usage: oom [capacity|fail_at]\n");
    return 2;
}

// k_thread_count threads start together and each allocates and frees k_thread_iterations blocks
// of sizes that identify the thread and the iteration (app_sizes::thread_block_size), then leaves
// one block live (thread_leak_size). Thread t works on device t % device_count. Every
// k_thread_async_every-th block is stream-ordered on the per-thread default stream.
#include "app_common.h"
#include "app_sizes.h"
#include "fake_cuda_control.h"

#include <atomic>
#include <thread>
#include <vector>

using namespace app_sizes;

namespace {

std::atomic<int> g_ready{0};

bool is_async(int iteration) { return iteration % k_thread_async_every == 0; }

}  // namespace

APP_FN void* thread_alloc(size_t size, bool async) {
    void* ptr = nullptr;
    if (async) {
        app::check("cudaMallocAsync", cudaMallocAsync(&ptr, size, cudaStreamPerThread), cudaSuccess);
    } else {
        app::check("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    }
    return ptr;
}

APP_FN void* thread_leak(size_t size) {
    void* ptr = nullptr;
    app::check("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    return ptr;
}

APP_FN void thread_main(int index, int device_count) {
    app::check("cudaSetDevice", cudaSetDevice(index % device_count), cudaSuccess);
    // Start together so that the threads really overlap.
    g_ready.fetch_add(1);
    while (g_ready.load() < k_thread_count) std::this_thread::yield();

    for (int i = 0; i < k_thread_iterations; ++i) {
        void* ptr = thread_alloc(thread_block_size(index, i), is_async(i));
        static_cast<unsigned char*>(ptr)[0] = static_cast<unsigned char>(i);
        if (is_async(i)) {
            app::check("cudaFreeAsync", cudaFreeAsync(ptr, cudaStreamPerThread), cudaSuccess);
        } else {
            app::check("cudaFree", cudaFree(ptr), cudaSuccess);
        }
    }
    thread_leak(thread_leak_size(index));
}

int main() {
    app::init_log();
    int device_count = 0;
    app::check("cudaGetDeviceCount", cudaGetDeviceCount(&device_count), cudaSuccess);
    std::vector<std::thread> threads;
    for (int t = 0; t < k_thread_count; ++t) threads.emplace_back(thread_main, t, device_count);
    for (std::thread& thread : threads) thread.join();
    app::log_info("device_count", static_cast<unsigned long long>(device_count));
    app::log_info("fake_live_bytes", fakecuda_live_bytes());
    app::log_info("fake_alloc_count", fakecuda_alloc_count());
    return 0;
}

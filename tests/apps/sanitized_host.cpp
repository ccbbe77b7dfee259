// The host of the sanitizer tests (tests/preload/sanitized_hosts_test.cpp), built with
// -fsanitize=address,undefined and with -fsanitize=thread: k_host_threads threads allocate and free
// for k_host_run_ms (so memguard's writer thread flushes the report while they append to it), each
// leaves one block live and exits while the program runs on. Thread t's blocks are
// host_block_size(t, i) bytes; its block left live is host_leak_size(t).
//
//   sanitized_host EXIT_CODE    returns EXIT_CODE from main
//
// Logs `info allocs_<t> <n>` (blocks thread t allocated, the live one included) and the fake
// runtime's live bytes at the end.
#include "app_common.h"
#include "fake_cuda_control.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

constexpr int k_host_threads = 4;
constexpr int k_host_run_ms = 700;
constexpr size_t host_block_size(int t, int i) {
    return static_cast<size_t>(t + 1) * 1'000'000 + static_cast<size_t>(i % 1000);
}
constexpr size_t host_leak_size(int t) { return static_cast<size_t>(t + 1) * 1'000'000 + 999'999; }

namespace {
std::atomic<int> g_ready{0};
}

APP_FN void* host_alloc(size_t size, bool async) {
    void* ptr = nullptr;
    if (async) {
        app::check("cudaMallocAsync", cudaMallocAsync(&ptr, size, cudaStreamPerThread), cudaSuccess);
    } else {
        app::check("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    }
    return ptr;
}

APP_FN void host_leak(size_t size) {
    void* ptr = nullptr;
    app::check("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
}

APP_FN void host_thread(int index, int* allocs) {
    g_ready.fetch_add(1);
    while (g_ready.load() < k_host_threads) std::this_thread::yield();
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(k_host_run_ms);
    int i = 0;
    for (; std::chrono::steady_clock::now() < end; ++i) {
        const bool async = i % 7 == 0;
        void* ptr = host_alloc(host_block_size(index, i), async);
        if (async) {
            app::check("cudaFreeAsync", cudaFreeAsync(ptr, cudaStreamPerThread), cudaSuccess);
        } else {
            app::check("cudaFree", cudaFree(ptr), cudaSuccess);
        }
    }
    host_leak(host_leak_size(index));
    *allocs = i + 1;
}

int main(int argc, char** argv) {
    app::init_log();
    // The fake runtime's state is made here, before the threads: its lazy initialization is not
    // instrumented, and ThreadSanitizer would see its first use by two threads as a race.
    int devices = 0;
    app::check("cudaGetDeviceCount", cudaGetDeviceCount(&devices), cudaSuccess);
    std::vector<int> allocs(k_host_threads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < k_host_threads; ++t) threads.emplace_back(host_thread, t, &allocs[static_cast<size_t>(t)]);
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < k_host_threads; ++t) {
        app::log_info(("allocs_" + std::to_string(t)).c_str(),
                      static_cast<unsigned long long>(allocs[static_cast<size_t>(t)]));
    }
    app::log_info("fake_live_bytes", fakecuda_live_bytes());
    return argc > 1 ? std::atoi(argv[1]) : 0;
}

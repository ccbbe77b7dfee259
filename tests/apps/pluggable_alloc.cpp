// Calls libmemguard.so's allocator-mode functions the way PyTorch's CUDAPluggableAllocator does
// (found with dlsym in the preloaded library, like torch.cuda.memory.CUDAPluggableAllocator's
// ctypes lookup), against the fake runtime. Scenarios (argv[1]):
//   basic    allocations on two streams, record_stream, frees, empty_cache
//   capture  torch.cuda.graph's protocol: begin_pool, capture, allocations from the private pool,
//            a free during the capture, end; a second capture sharing the pool; release, empty_cache
//   oom      allocations until the device is full (the last one fails), then the memory fraction
//   oom_c10 <libc10.so>  the same failure with PyTorch's libc10 loaded RTLD_LOCAL first (as torch
//            loads it under Python): the exception's thrown and dynamic types are logged
//   unknown  a free of a pointer memguard never handed out
//   deep     one allocation from 100 nested frames (the stack depth cut)
//   retry    a device allocation that fails until the cache is freed, then succeeds: the
//            runtime's last error must not be left set (PyTorch checks it after kernel launches)
//   threads  4 threads allocate and free blocks of one size on one stream, 20000 times each (the
//            report must order each address's T and t records)
//   fork     a thread allocates and frees in a loop while the main thread forks 40 times; each
//            child allocates and frees once and exits (it must not find the allocator locked)
// Log lines (app_common.h): `info block <addr> <size> <stream> <function>` per allocation,
// `info freed <addr>`, `info oom <what>`, `result <label> <error>`.
#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <typeinfo>
#include <utility>

#include "app_common.h"
#include "fake_cuda_control.h"

namespace {

using PoolId = std::pair<unsigned long long, unsigned long long>;
using AllocFn = void* (*)(size_t, int, cudaStream_t);
using FreeFn = void (*)(void*, size_t, int, cudaStream_t);
using InitFn = void (*)(int);
using ResetFn = void (*)();
using FractionFn = void (*)(double, int);
using RecordStreamFn = void (*)(void*, cudaStream_t);
using BeginPoolFn = void (*)(int, PoolId, std::function<bool(cudaStream_t)>);
using PoolFn = void (*)(int, PoolId);

struct Api {
    AllocFn alloc;
    FreeFn free;
    InitFn init;
    ResetFn reset;
    FractionFn fraction;
    RecordStreamFn record_stream;
    BeginPoolFn begin_pool;
    PoolFn end_pool;
    PoolFn release_pool;
};
Api api;

template <typename Fn>
void find(Fn& slot, const char* name) {
    slot = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
    if (!slot) {
        std::fprintf(stderr, "app check failed: %s not found (is libmemguard.so preloaded?)\n", name);
        std::exit(k_app_check_failed);
    }
}

void log_block(void* p, size_t size, cudaStream_t s, const char* function) {
    std::printf("info block %p %zu %p %s\n", p, size, static_cast<void*>(s), function);
}

void release(void* p, size_t size, cudaStream_t s) {
    api.free(p, size, 0, s);
    std::printf("info freed %p\n", p);
}

}  // namespace

APP_FN void* allocate_activation(size_t size, cudaStream_t s) {
    void* p = api.alloc(size, 0, s);
    log_block(p, size, s, "allocate_activation");
    return p;
}

APP_FN void* allocate_weights(size_t size, cudaStream_t s) {
    void* p = api.alloc(size, 0, s);
    log_block(p, size, s, "allocate_weights");
    return p;
}

APP_FN void* allocate_in_graph(size_t size, cudaStream_t s) {
    void* p = api.alloc(size, 0, s);
    log_block(p, size, s, "allocate_in_graph");
    return p;
}

namespace {

int basic() {
    cudaStream_t s1 = nullptr, s2 = nullptr;
    app::check("cudaStreamCreate", cudaStreamCreate(&s1), cudaSuccess);
    app::check("cudaStreamCreate", cudaStreamCreate(&s2), cudaSuccess);
    void* a = allocate_activation(1000, s1);       // small pool: 1024-byte block, 2 MiB segment
    void* b = allocate_weights(3u << 20, s1);      // large pool: 20 MiB segment, split
    void* c = allocate_activation(4096, nullptr);  // legacy stream: its own small segment
    api.record_stream(b, s2);
    release(a, 1000, s1);
    release(b, 3u << 20, s1);
    release(c, 4096, nullptr);
    api.reset();  // torch.cuda.empty_cache: every segment is wholly free now
    std::printf("info fake_live_bytes %zu\n", fakecuda_live_bytes());
    return 0;
}

int capture() {
    cudaStream_t s = nullptr;
    app::check("cudaStreamCreate", cudaStreamCreate(&s), cudaSuccess);
    const PoolId pool{1, 0};
    // torch.cuda.graph: the pool is announced before the capture begins; the filter accepts the
    // capturing stream while it captures.
    auto filter = [s](cudaStream_t x) {
        cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
        return x == s && cudaStreamIsCapturing(x, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
    };
    api.begin_pool(0, pool, filter);
    app::expect("begin_capture_1", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    void* g1 = allocate_in_graph(8192, s);
    void* tmp = allocate_in_graph(4096, s);
    release(tmp, 4096, s);  // freed during the capture: back to the private pool, no cudaFree
    cudaGraph_t graph1 = nullptr;
    app::expect("end_capture_1", cudaStreamEndCapture(s, &graph1), cudaSuccess);
    api.end_pool(0, pool);
    void* outside = allocate_activation(4096, s);  // after the capture: the default pool

    // A second graph sharing the pool (torch.cuda.graph(..., pool=g1.pool())).
    api.begin_pool(0, pool, filter);
    app::expect("begin_capture_2", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    void* g2 = allocate_in_graph(2u << 20, s);
    cudaGraph_t graph2 = nullptr;
    app::expect("end_capture_2", cudaStreamEndCapture(s, &graph2), cudaSuccess);
    api.end_pool(0, pool);

    // Graph reset: the graph's tensors die, then the pool is released by both graphs.
    release(g1, 8192, s);
    release(g2, 2u << 20, s);
    release(outside, 4096, s);
    cudaGraphDestroy(graph1);
    cudaGraphDestroy(graph2);
    api.release_pool(0, pool);
    api.release_pool(0, pool);
    api.reset();
    std::printf("info fake_live_bytes %zu\n", fakecuda_live_bytes());
    return 0;
}

APP_FN int exhaust(cudaStream_t s, void** held, int max) {
    int n = 0;
    for (; n < max; ++n) {
        try {
            held[n] = allocate_weights(24u << 20, s);
        } catch (const std::bad_alloc& e) {
            std::printf("info oom %s\n", e.what());
            break;
        }
    }
    return n;
}

int oom() {
    // FAKE_CUDA_CAPACITY is 100 MiB: four 24 MiB blocks fit, the fifth does not.
    void* held[16] = {};
    int n = exhaust(nullptr, held, 16);
    std::printf("info held %d\n", n);
    for (int i = 0; i < n; ++i) release(held[i], 24u << 20, nullptr);
    // The memory fraction: half of the 100 MiB; with the cache emptied, two blocks fit.
    api.reset();
    api.fraction(0.5, 0);
    n = exhaust(nullptr, held, 16);
    std::printf("info held_with_fraction %d\n", n);
    for (int i = 0; i < n; ++i) release(held[i], 24u << 20, nullptr);
    return 0;
}

int oom_c10(const char* libc10) {
    if (!dlopen(libc10, RTLD_NOW | RTLD_LOCAL)) {
        std::fprintf(stderr, "app check failed: %s\n", dlerror());
        return k_app_check_failed;
    }
    // FAKE_CUDA_CAPACITY is 100 MiB: the fifth 24 MiB block fails. Caught as PyTorch's binding
    // would catch anything: the thrown type decides which handler matches, the dynamic type
    // (the vtable's) what virtual calls see.
    void* held[8] = {};
    int n = 0;
    for (; n < 8; ++n) {
        try {
            held[n] = allocate_weights(24u << 20, nullptr);
        } catch (const std::exception& e) {
            std::string what = e.what();
            std::printf("info oom_thrown %s\n", abi::__cxa_current_exception_type()->name());
            std::printf("info oom_dynamic %s\n", typeid(e).name());
            std::printf("info oom %s\n", what.substr(0, what.find('\n')).c_str());
            break;
        }
    }
    std::printf("info held %d\n", n);
    for (int i = 0; i < n; ++i) release(held[i], 24u << 20, nullptr);
    return 0;
}

int retry() {
    // FAKE_CUDA_CAPACITY is 100 MiB: four 24 MiB segments; two are freed (cached, still reserved),
    // so a 40 MiB request fails on the device until memguard returns them, then fits.
    void* held[4] = {};
    int n = exhaust(nullptr, held, 4);
    release(held[0], 24u << 20, nullptr);
    release(held[1], 24u << 20, nullptr);
    void* big = allocate_activation(40u << 20, nullptr);
    std::printf("info retry_alloc %d\n", big != nullptr ? 0 : 1);
    std::printf("info last_error %d\n", static_cast<int>(cudaPeekAtLastError()));
    release(big, 40u << 20, nullptr);
    for (int i = 2; i < n; ++i) release(held[i], 24u << 20, nullptr);
    return 0;
}

}  // namespace

// 100 frames of these above the allocation in `deep`: more than any depth the test asks for.
APP_FN __attribute__((noinline)) void* allocate_deep(int frames) {
    if (frames > 0) {
        void* p = allocate_deep(frames - 1);
        std::printf("%s", "");  // keeps the call from becoming a tail call
        return p;
    }
    return allocate_activation(2048, nullptr);
}

namespace {

int deep() {
    void* p = allocate_deep(100);
    release(p, 2048, nullptr);
    return 0;
}

int threads() {
    std::vector<std::thread> workers;
    for (int i = 0; i < 4; ++i) {
        workers.emplace_back([] {
            for (int k = 0; k < 20000; ++k) {
                void* p = api.alloc(4096, 0, nullptr);
                api.free(p, 4096, 0, nullptr);
            }
        });
    }
    for (std::thread& w : workers) w.join();
    std::printf("info pairs %d\n", 4 * 20000);
    return 0;
}

int fork_while_freeing() {
    std::atomic<bool> stop{false};
    std::thread busy([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            void* p = api.alloc(4096, 0, nullptr);
            api.free(p, 4096, 0, nullptr);
        }
    });
    int hung = 0, failed = 0;
    for (int i = 0; i < 40; ++i) {
        pid_t pid = fork();
        if (pid < 0) {
            ++failed;
            continue;
        }
        if (pid == 0) {
            void* p = api.alloc(4096, 0, nullptr);
            api.free(p, 4096, 0, nullptr);
            _exit(p != nullptr ? 0 : 1);
        }
        int status = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        pid_t done = 0;
        while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (done == 0) {  // the child hangs: the allocator was locked in it
            ++hung;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            ++failed;
        }
    }
    stop = true;
    busy.join();
    std::printf("info forks 40 hung %d failed %d\n", hung, failed);
    return hung == 0 && failed == 0 ? 0 : 1;
}

int unknown() {
    int x = 0;
    api.free(&x, sizeof(x), 0, nullptr);
    void* p = allocate_activation(512, nullptr);
    release(p, 512, nullptr);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    app::init_log();
    find(api.alloc, "memguard_alloc");
    find(api.free, "memguard_free");
    find(api.init, "memguard_allocator_init");
    find(api.reset, "memguard_allocator_empty_cache");
    find(api.fraction, "memguard_allocator_memory_fraction");
    find(api.record_stream, "memguard_allocator_record_stream");
    find(api.begin_pool, "memguard_allocator_begin_pool");
    find(api.end_pool, "memguard_allocator_end_pool");
    find(api.release_pool, "memguard_allocator_release_pool");
    int devices = 0;
    cudaGetDeviceCount(&devices);
    api.init(devices);  // PyTorch's CUDA lazy initialization
    std::string mode = argc > 1 ? argv[1] : "basic";
    if (mode == "basic") return basic();
    if (mode == "capture") return capture();
    if (mode == "oom") return oom();
    if (mode == "oom_c10" && argc > 2) return oom_c10(argv[2]);
    if (mode == "unknown") return unknown();
    if (mode == "retry") return retry();
    if (mode == "deep") return deep();
    if (mode == "threads") return threads();
    if (mode == "fork") return fork_while_freeing();
    std::fprintf(stderr, "unknown scenario %s\n", mode.c_str());
    return 2;
}

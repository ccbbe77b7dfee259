// The floor of PyTorch's pluggable-allocator path, for bench/allocator_mode.py.
//
// Not an allocator anyone should use: one exact-size free list per request size, never returns
// memory, no stream ordering (the benchmark runs on one stream). It does as little as an
// allocator can, so `torch.empty` latency through CUDAPluggableAllocator with this library is
// what PyTorch's own pluggable path costs (std::function dispatch, its mutex and the metadata
// hash map it keeps per pointer) plus close to nothing. The gap between this arm and memguard
// without stacks is memguard's allocator; the gap between this arm and native is PyTorch's.
//
// Built by bench/allocator_mode.py with `g++ -O2 -shared -fPIC`; needs no CUDA headers:
// cudaMalloc is taken from the libcudart that torch has already loaded.
#include <dlfcn.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

using CudaMalloc = int (*)(void**, size_t);

CudaMalloc real_cuda_malloc() {
    static CudaMalloc fn = [] {
        for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
            if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
                if (void* f = dlsym(h, "cudaMalloc")) return reinterpret_cast<CudaMalloc>(f);
            }
        }
        return reinterpret_cast<CudaMalloc>(dlsym(RTLD_DEFAULT, "cudaMalloc"));
    }();
    return fn;
}

std::mutex g_mu;
std::unordered_map<size_t, std::vector<void*>> g_free;

}  // namespace

extern "C" void* floor_alloc(size_t size, int /*device*/, void* /*stream*/) {
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = g_free.find(size);
        if (it != g_free.end() && !it->second.empty()) {
            void* p = it->second.back();
            it->second.pop_back();
            return p;
        }
    }
    CudaMalloc m = real_cuda_malloc();
    void* p = nullptr;
    if (m == nullptr || m(&p, size == 0 ? 1 : size) != 0) return nullptr;
    return p;
}

extern "C" void floor_free(void* ptr, size_t size, int /*device*/, void* /*stream*/) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_free[size].push_back(ptr);
}

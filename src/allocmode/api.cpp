// Allocator mode (MEMGUARD_ALLOCATOR=memguard): the functions PyTorch's pluggable-allocator
// interface calls, exported from libmemguard.so: entry points over the tracking allocator
// (tracking_allocator.h: memguard's caching allocator, src/alloc, over the real CUDA runtime,
// cuda_backend.h). Like the hooks they reach the process-global through runtime/process.h, so
// this file is built above the runtime (src/allocmode/CMakeLists.txt), not in memguard_allocmode.
//
//   memguard_alloc / memguard_free      torch.cuda.memory.CUDAPluggableAllocator(path, "memguard_alloc",
//                                       "memguard_free") takes them by name
//   memguard_allocator_init             set_init_fn              (CUDA lazy initialization)
//   memguard_allocator_empty_cache      set_reset_fn             (torch.cuda.empty_cache)
//   memguard_allocator_memory_fraction  set_memory_fraction_fn   (set_per_process_memory_fraction)
//   memguard_allocator_record_stream    set_record_stream_fn     (Tensor.record_stream)
//   memguard_allocator_begin_pool       set_begin_allocate_to_pool   (CUDAGraph::capture_begin, MemPool)
//   memguard_allocator_end_pool         set_end_allocate_to_pool_fn  (capture_end)
//   memguard_allocator_release_pool     set_release_pool             (graph reset, MemPool destruction)
//
// The three pool hooks take C++ types (PyTorch's MempoolId_t is std::pair<unsigned long long,
// unsigned long long>, the filter a std::function by value): they rely on libstdc++'s ABI, which
// PyTorch's wheels share (cxx11 ABI).
//
// Each allocation records a T record (and its segment's A record when the pool grows) with the
// native and Python stacks; each free a t record, written before the block can be reused. An
// allocation that fails after the cache was freed and the rescue ran writes O/o records and
// throws PyTorch's c10::OutOfMemoryError, built by libc10's own constructor (torch_error.h), so
// Python code gets torch.cuda.OutOfMemoryError as with PyTorch's allocator; when libc10 lacks the
// symbols (old-ABI build, no torch) it throws memguard's OutOfMemory, a std::bad_alloc that PyTorch
// turns into a RuntimeError. Returning nullptr is no option: CUDAPluggableAllocator::malloc does
// not check it and would hand out a tensor without memory.
#include "allocmode/api.h"

#include <functional>
#include <utility>

#include "allocmode/tracking_allocator.h"
#include "common/log.h"
#include "runtime/process.h"

#define MG_EXPORT extern "C" __attribute__((visibility("default")))

using memguard::alloc::CachingAllocator;
using memguard::allocmode::existing_allocator;
using memguard::runtime::ensure_initialized;
using memguard::runtime::recorder;

MG_EXPORT void* memguard_alloc(size_t size, int device, cudaStream_t stream) {
    // Where this function's return address is: its caller is the first frame of the tensor's
    // stack, found there again by the thread's StackMemo (track/stack_memo.h) without unwinding.
    const uintptr_t* ret_slot = nullptr;
#if defined(__x86_64__)
    ret_slot = static_cast<const uintptr_t*>(__builtin_frame_address(0)) + 1;
    if (*ret_slot != reinterpret_cast<uintptr_t>(__builtin_return_address(0))) ret_slot = nullptr;
#endif
    ensure_initialized();
    if (size == 0) return nullptr;
    return memguard::allocmode::allocate(recorder(), size, device, reinterpret_cast<uintptr_t>(stream), ret_slot);
}

MG_EXPORT void memguard_free(void* ptr, size_t size, int device, cudaStream_t stream) {
    (void)size;  // the allocator knows the block; PyTorch passes what it recorded at allocation
    (void)stream;
    if (ptr == nullptr) return;
    memguard::allocmode::deallocate(recorder(), ptr, device);
}

MG_EXPORT void memguard_allocator_init(int device_count) {
    ensure_initialized();
    memguard::allocmode::allocator(recorder(), device_count);
}

MG_EXPORT void memguard_allocator_empty_cache(void) {
    if (CachingAllocator* a = existing_allocator()) a->empty_cache();
}

MG_EXPORT void memguard_allocator_memory_fraction(double fraction, int device) {
    CachingAllocator* a = memguard::allocmode::allocator(recorder());
    if (!a) return;
    int err = a->set_memory_fraction(device, fraction);
    if (err != 0) MG_LOG_WARN("memory fraction {} for device {} not set (error {})", fraction, device, err);
}

MG_EXPORT void memguard_allocator_record_stream(void* ptr, cudaStream_t stream) {
    if (CachingAllocator* a = existing_allocator()) a->record_stream(ptr, reinterpret_cast<uintptr_t>(stream));
}

MG_EXPORT void memguard_allocator_begin_pool(int device, std::pair<unsigned long long, unsigned long long> id,
                                             std::function<bool(cudaStream_t)> filter) {
    CachingAllocator* a = memguard::allocmode::allocator(recorder());
    if (!a) return;
    // PyTorch's filter asks the runtime about the stream (AT_CUDA_CHECK, which throws): an
    // exception must not cross the allocator's lock, so it counts as "not this pool".
    memguard::alloc::StreamFilter f = [fn = std::move(filter)](memguard::alloc::Stream s) {
        try {
            return fn && fn(reinterpret_cast<cudaStream_t>(s));
        } catch (...) {
            return false;
        }
    };
    a->begin_allocate_to_pool(device, {id.first, id.second}, std::move(f));
}

MG_EXPORT void memguard_allocator_end_pool(int device, std::pair<unsigned long long, unsigned long long> id) {
    if (CachingAllocator* a = existing_allocator()) a->end_allocate_to_pool(device, {id.first, id.second});
}

MG_EXPORT void memguard_allocator_release_pool(int device, std::pair<unsigned long long, unsigned long long> id) {
    if (CachingAllocator* a = existing_allocator()) a->release_pool(device, {id.first, id.second});
}

// PyTorch's wheels use libstdc++'s cxx11 ABI (torch._C._GLIBCXX_USE_CXX11_ABI); the pool hooks
// above pass std::pair and std::function across that boundary.
static_assert(_GLIBCXX_USE_CXX11_ABI == 1, "libmemguard.so must be built with the cxx11 libstdc++ ABI");

// Allocator mode, Python side (MEMGUARD_ALLOCATOR=memguard): installing memguard as PyTorch's CUDA
// allocator through the pluggable-allocator interface, answering PyTorch's memory statistics from
// memguard, and the garbage collection of the out-of-memory rescue.
//
// When: on the first "import" audit event after torch.cuda.memory has finished loading (during
// `import torch`, well before anything can initialize CUDA: the swap must precede CUDA's lazy
// initialization, which makes PyTorch's allocator "initialized" for good).
//
// How: torch._C._cuda_customAllocator(alloc, free) with the addresses of libmemguard.so's
// exported memguard_alloc / memguard_free (what torch.cuda.memory.CUDAPluggableAllocator does
// after its ctypes lookup), the hook setters of the returned object with the addresses of the
// other exported hooks, then torch._C._cuda_changeCurrentAllocator. PyTorch's statistics entry
// points (torch._C._cuda_memoryStats, _cuda_resetPeakMemoryStats,
// _cuda_resetAccumulatedMemoryStats), which raise for a pluggable allocator, are replaced by ones
// answered from memguard's allocator; the entry points that cannot work with a pluggable
// allocator (snapshots, memory history, CUDA graph trees' pool checkpoints) warn once, naming
// the limit, and then fail as they would.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memguard::python {

/// What the interpose layer hands over in allocator mode.
struct AllocatorBridge {
    // Addresses of libmemguard.so's exported functions, given to PyTorch.
    uintptr_t alloc = 0, free = 0;
    uintptr_t init = 0, reset = 0, memory_fraction = 0, record_stream = 0;
    uintptr_t begin_pool = 0, end_pool = 0, release_pool = 0;
    /// torch.cuda.memory_stats() items of `device` ("allocated_bytes.all.current", ...); empty when
    /// the device does not exist.
    std::vector<std::pair<std::string, int64_t>> (*stats)(int device) = nullptr;
    bool (*reset_peak)(int device) = nullptr;
    bool (*reset_accumulated)(int device) = nullptr;
};

/// Called once from the library constructor, before install(), when MEMGUARD_ALLOCATOR=memguard.
void set_allocator_bridge(const AllocatorBridge& bridge);

/// True while the switch waits for torch (the audit hook asks on every import event).
bool allocator_install_pending() noexcept;

/// On an import event (GIL held): installs memguard once torch.cuda.memory has loaded. Says in
/// one line why when it cannot (no CUDA in this PyTorch, allocator already initialized).
void maybe_install_allocator();

/// True while a garbage collection runs on the calling thread (kept by the gc callback).
bool collecting_on_this_thread() noexcept;
void set_collecting_on_this_thread(bool collecting) noexcept;

/// The allocator's out-of-memory rescue: one full gc.collect() when this thread holds the GIL or
/// can take it (it has a Python thread state and holds no memguard lock: the caller guarantees
/// the latter), the interpreter runs, and no stream capture is in progress. Returns whether a
/// collection ran.
bool oom_rescue_collect(bool capture_underway);

}  // namespace memguard::python

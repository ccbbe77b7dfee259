// Allocator mode's allocator as PyTorch's pluggable-allocator hooks use it: memguard's caching
// allocator (src/alloc) over the real CUDA runtime (cuda_backend.h), with the tensor records
// written around it (an allocation's T, and its segment's A when the pool grows; a free's t,
// written before the block can be reused; a final failure's O/o) and PyTorch's own
// c10::OutOfMemoryError thrown when an allocation fails (torch_error.h).
//
// The allocator is created on first use, at PyTorch's CUDA initialization (init hook, with the
// device count) or, when used by hand without the hooks, at the first call, and never destroyed:
// frees may arrive during process teardown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "alloc/caching_allocator.h"
#include "track/recorder.h"

namespace memguard::allocmode {

/// The allocator, created on first use (`device_count` <= 0: asks the runtime); nullptr when
/// there is no device.
alloc::CachingAllocator* allocator(track::Recorder& rec, int device_count = -1);

/// The allocator when it exists, else nullptr (never creates it).
alloc::CachingAllocator* existing_allocator() noexcept;

/// An allocation of `size` bytes (> 0) on `device` for `stream`, recorded; throws PyTorch's
/// out-of-memory error (or memguard's OutOfMemory) when it fails. `ret_slot`: where the hook's
/// return address is stored (Recorder::capture_interned_stack), or nullptr.
void* allocate(track::Recorder& rec, size_t size, int device, uintptr_t stream, const uintptr_t* ret_slot = nullptr);

/// The free of `ptr` (not null), recorded before the block can be reused. Never throws.
void deallocate(track::Recorder& rec, void* ptr, int device);

/// torch.cuda.memory._set_allocator_settings(text): the settings memguard's allocator has, read
/// as PyTorch reads them (core_settings), applied now, or at the allocator's creation when CUDA
/// has not started. expandable_segments applies from the next allocation on (PyTorch allows turning
/// it on and off); blocks already in expandable segments stay where they are. Returns the notes on
/// what is not applied (torch_alloc_conf.h).
std::vector<std::string> apply_torch_settings(const char* text);

/// torch.cuda.memory_stats() items of `device`; empty when the device does not exist.
std::vector<std::pair<std::string, int64_t>> stats_of(int device);
/// Resets the peak (accumulated) statistics of `device`; true when the device is valid.
bool reset_peak_of(int device);
bool reset_accumulated_of(int device);

/// The recorder's view of the tensor blocks (track::Recorder::TensorCounters): the allocated bytes
/// now and at their peak of `device` (-1: every device, summed), torch.cuda.memory_allocated() and
/// max_memory_allocated(); and the reset of that peak (torch.cuda.reset_peak_memory_stats()).
void tensor_counters(int device, uint64_t* live, uint64_t* peak);
void reset_tensor_peak(int device);

/// fork(2): the allocator's device locks (runtime/fork.h takes them first). No-ops before the
/// allocator exists.
void lock_for_fork();
void unlock_after_fork();

}  // namespace memguard::allocmode

// Allocator mode's answers to PyTorch's memory API beyond the statistics (torch_bridge.cpp):
// torch._C entry points that PyTorch's pluggable-allocator interface refuses or does not forward,
// replaced at the switch by functions answered from memguard's allocator.
//
//   _cuda_getMemoryFraction                 get_per_process_memory_fraction: the core's limit
//                                           over the device's total, as PyTorch computes it
//   _cuda_attach_out_of_memory_observer     the observer is kept; memguard calls it on an OOM as
//                                           PyTorch does: (device, alloc size, limit or total,
//                                           free), with no allocator lock held, the GIL taken,
//                                           before the OutOfMemoryError is thrown
//   _accelerator_setAllocatorSettings,      torch.cuda.memory._set_allocator_settings: PyTorch's
//   _cuda_cudaCachingAllocator_set_         own function runs first (its errors for bad input
//   allocator_settings                      stay PyTorch's), then the settings memguard's
//                                           allocator has are applied to it live, and the others
//                                           are named once (a warning) as not applied
//
// set_per_process_memory_fraction needs nothing here: PyTorch forwards it to the pluggable
// allocator's memory-fraction hook (api.cpp). caching_allocator_alloc / _delete neither: they
// reach memguard_alloc / memguard_free through the pluggable allocator's raw_alloc / raw_delete.
#pragma once

#include <cstddef>

#include "python/capi.h"

namespace memguard::allocmode {

/// Replaces the entry points above in torch._C (those this PyTorch has). With the GIL held.
void patch_memory_api(python::PyObject* torch_c);

/// Whether any OOM observer was attached (read without the GIL).
bool has_oom_observers() noexcept;

/// Calls every attached observer with PyTorch's arguments, oldest first. With the GIL held and
/// no allocator lock. An observer that raises is logged and the others still run (PyTorch would
/// raise the observer's error instead of the OutOfMemoryError).
void call_oom_observers(int device, size_t alloc_size, size_t limit_or_total, size_t device_free);

}  // namespace memguard::allocmode

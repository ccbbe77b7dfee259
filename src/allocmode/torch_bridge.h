// Allocator mode's torch bridge (MEMGUARD_ALLOCATOR=memguard): installing memguard as PyTorch's CUDA
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

#include <string>

#include "alloc/caching_allocator.h"
#include "python/capi.h"
#include "track/recorder.h"

namespace memguard::allocmode {

/// From start-up, before the Python hook is installed, when MEMGUARD_ALLOCATOR=memguard: hands the
/// switch to the Python hook (python/allocator_mode.h), which runs it on an import event. `rec`
/// learns that it records an allocator-mode process once the switch happened.
void arm_torch_switch(track::Recorder& rec);

/// The allocator's out-of-memory rescue: one full gc.collect() when this thread holds the GIL or
/// can take it (it has a Python thread state and holds no memguard lock: the caller guarantees
/// the latter), the interpreter runs, and no stream capture is in progress (`capture_underway`:
/// one the allocator or the recorder knows of). Returns whether a collection ran.
bool oom_rescue_collect(bool capture_underway);

/// After the O record of an allocation memguard's allocator refused: the x record (source
/// allocator, figures from `r`, the request's stacks), inside an OOM moment with the live tensors'
/// tags when the thread may take the GIL (as for the rescue) and no capture is in progress; then
/// the report is flushed and the one stderr line printed (python/insight.h).
void explain_allocator_oom(track::Recorder& rec, const alloc::OomReport& r, uint32_t stack_id,
                           uint32_t python_stack_id);

/// The message of the pending Python exception, which is cleared ("?" when it has none). With
/// the GIL held.
std::string python_error_text();

/// The first positional argument as a device index; -1 (error cleared) when there is none or it
/// is not an integer. With the GIL held.
int python_device_arg(python::PyObject* args);

/// Calls the observers attached through torch._C._cuda_attach_out_of_memory_observer
/// (torch_memory_api.h) for a final failure, as PyTorch calls them: on the allocating thread, with
/// no allocator lock held and the GIL taken (from any thread, while the interpreter runs), before
/// the OutOfMemoryError is thrown. Nothing when none is attached.
void notify_oom_observers(const alloc::OomReport& r);

}  // namespace memguard::allocmode

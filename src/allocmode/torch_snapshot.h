// Allocator mode's snapshots and memory history (MEMGUARD_ALLOCATOR=memguard): torch._C's
// _cuda_memorySnapshot, _cuda_record_memory_history(_legacy) and _cuda_isHistoryEnabled,
// replaced at the switch by functions answered from memguard's allocator, so that
// torch.cuda.memory_snapshot(), torch.cuda.memory._snapshot(), _record_memory_history() and
// _dump_snapshot() give PyTorch's format (docs/architecture.md, "Allocator mode").
//
// The state is the core's (alloc/history.h): its segments and blocks, and a ring of trace entries
// per device written under the device lock. Entries and blocks carry the allocation's site (the
// tracking allocator's native and Python stack ids, taken anyway); frames are made from the
// recorder's stack tables when a snapshot is taken, after the core's data was copied out and its
// lock released.
#pragma once

#include <atomic>

#include "alloc/caching_allocator.h"
#include "python/capi.h"
#include "track/recorder.h"

namespace memguard::allocmode {

/// Replaces the entry points in `torch_c` (those this PyTorch has). `rec` owns the stack tables.
void install_snapshot_functions(python::PyObject* torch_c, track::Recorder& rec);

/// Set while the memory history keeps the stacks of frees (context='all').
extern std::atomic<bool> g_history_free_stacks;

/// The site of a free for the memory history: its stacks when the history keeps them, else 0
/// (one relaxed load). Called before the allocator's lock.
alloc::SiteId history_free_site_slow(track::Recorder& rec);
inline alloc::SiteId history_free_site(track::Recorder& rec) {
    return g_history_free_stacks.load(std::memory_order_relaxed) ? history_free_site_slow(rec) : 0;
}

}  // namespace memguard::allocmode

// Accounting of garbage collections: a gc.callbacks entry turns every collection (automatic,
// explicit, memguard's) into a report record, with how long it took, what it collected and the
// CUDA bytes it freed (read from PyTorch's allocated-bytes counter, or the GPU bytes memguard saw
// freed on the collecting thread when that is more: memory freed outside PyTorch's allocator, or
// no torch at all); gc.collect is wrapped to tell explicit collections from automatic ones.
// Collections never nest and run with the GIL held: the collection window below is GIL-protected;
// the trigger is the calling thread's.
#pragma once

#include <cstdint>

#include "format/vocabulary.h"

namespace memguard::python {

struct PyObject;
class CompileMark;

/// From the hook's start-up (GIL held): appends the gc.callbacks entry and replaces gc.collect by
/// its wrapper. False, with nothing changed, when `gc` lacks what it needs.
bool start_gc_accounting(PyObject* gc);

/// What collect_for() did.
enum class CollectResult { Collected, Budget, Unsafe, Off };

/// One of memguard's collections (trigger memguard, recompute or step) of `generation`, when the
/// time budget (gc_budget.h) allows it: the original gc.collect(), explained when
/// MEMGUARD_EXPLAIN_CYCLES is on and the torch side gave its explainer, recorded as one Y (with
/// `mark`'s compile ids and the age of its first mark for the compile trigger). Never raises. The
/// caller decided that the moment is safe (CompileMark::decide, or the natives' unsafe_moment()).
CollectResult collect_for(format::GcTrigger trigger, int generation, const CompileMark* mark);

/// memguard's collection of compile garbage at a safe point: collect_for(memguard, 2, &mark).
void collect_compile_garbage(const CompileMark& mark);

/// The torch side's memguard_explain.explained_collect (a strong reference the caller keeps), which
/// memguard's collections call instead of gc.collect when they are explained.
void set_explainer(PyObject* explained_collect);
/// The explanation `id` was written inside the owned window of this thread: its Y names it.
void note_explanation(uint32_t id);
/// True inside one of memguard's (or an explained) collections on this thread.
bool explaining_on_this_thread();

}  // namespace memguard::python

// Accounting of garbage collections: a gc.callbacks entry turns every collection (automatic,
// explicit, memguard's) into a report record, with how long it took, what it collected and the
// CUDA bytes it freed (read from PyTorch's allocated-bytes counter, or the GPU bytes memguard saw
// freed on the collecting thread when that is more: memory freed outside PyTorch's allocator, or
// no torch at all); gc.collect is wrapped to tell explicit collections from automatic ones.
// Collections never nest and run with the GIL held: the collection window below is GIL-protected;
// the trigger is the calling thread's.
#pragma once

namespace memguard::python {

struct PyObject;
class CompileMark;

/// From the hook's start-up (GIL held): appends the gc.callbacks entry and replaces gc.collect by
/// its wrapper. False, with nothing changed, when `gc` lacks what it needs.
bool start_gc_accounting(PyObject* gc);

/// memguard's collection of compile garbage at a safe point: one full gc.collect() (the original),
/// recorded with trigger "memguard", `mark`'s compile ids and the age of its first mark.
void collect_compile_garbage(const CompileMark& mark);

}  // namespace memguard::python

// The compile window. A full collection costs time in proportion to every tracked object, and a
// PyTorch process holds hundreds of thousands of them; compile garbage is only objects made during
// the compile. So when a compile starts and no mark is pending anywhere, memguard freezes the
// objects that exist (gc.freeze(), O(1)); its collection at the safe point then scans only what was
// made since, and unfreezes right after. Objects older than the compile that became garbage
// meanwhile are left to the next ordinary collection. Never done when the program froze objects
// itself: the freeze count is then neither 0 nor what it was when the hook started (CPython 3.12
// starts with 375 immortal tuples frozen; a window's gc.unfreeze() returns them to the oldest
// generation, and the next full collection moves them back, as 3.12's collector does with every
// immortal object it meets). All of it runs with the GIL held; its state is GIL-protected.
#pragma once

#include <cstdint>

namespace memguard::python {

struct PyObject;

/// Whether a compile window may freeze objects, given gc.get_freeze_count() now and when the hook
/// started (`baseline`; -1: not known): only while the program has frozen nothing itself. CPython
/// 3.12 starts with a few hundred of its own tuples frozen, the baseline; a freeze of the
/// program's freezes every tracked object, so the count is then neither 0 nor the baseline (and a
/// failed call, -1, is no count at all).
inline bool compile_window_may_open(long freeze_count, long baseline) {
    return freeze_count == 0 || (freeze_count > 0 && freeze_count == baseline);
}

/// From the hook's start-up: finds gc.freeze, gc.unfreeze and gc.get_freeze_count in `gc` and
/// notes the baseline count.
void start_compile_window(PyObject* gc);

/// A compile starts while `threads_with_marks` threads have a pending mark: freezes the existing
/// objects when none has and the program froze nothing itself.
void open_compile_window(int threads_with_marks);

/// Unfreezes, when a window is open (memguard's collection ran, no safe point can come, or exit).
void close_compile_window();

/// At the start of a collection that is not memguard's: a window open for more than 30 s has been
/// forgotten (its thread ended with a mark pending) and is closed, so that the next collections
/// see every object again. (gc.unfreeze only moves lists: safe inside a collection.)
void close_forgotten_compile_window(int64_t now_ns);

}  // namespace memguard::python

// The embedded CPython hook (issue: release compile garbage).
//
// Activation: the library constructor calls install(). When the process is a CPython 3.10-3.14
// interpreter that has not initialized yet, an audit hook is added (PySys_AddAuditHook is legal
// before Py_Initialize). The hook does nothing until the interpreter is initialized; on the first
// audited event after that it sets up, on the "import" events after that it registers dynamo's
// end-of-compile callback once torch._dynamo.callback is loaded, and it stops for good when
// finalization begins. In a process that is not Python nothing happens.
//
// Policy: a dynamo compile marks its own thread (the callback only marks). While a mark is pending
// on a thread, a C profile function on that thread waits for the first safe point: a normal
// return of the frame that made the compiling call (or of a shallower one), with the thread
// outside any torch.compile region, not compiling, and no stream capturing anywhere in the
// process. There one full gc.collect() runs and the mark clears. With no mark
// pending no profile function is installed. A compile that starts with no mark pending anywhere
// freezes the objects that already exist (gc.freeze), so that this collection scans only what the
// compile made; it unfreezes right after.
//
// Accounting: a gc.callbacks entry turns every collection (automatic, explicit, memguard's) into
// a report record, with the CUDA bytes it freed read from PyTorch's allocated-bytes counter.
#pragma once

#include <cstdint>

namespace memguard::python {

struct HookSettings {
    bool collect_compile_garbage = true;  // MEMGUARD_COLLECT_COMPILE_GARBAGE
    bool python_stacks = true;            // Python frames on allocation records
    bool compile_window = true;           // MEMGUARD_COMPILE_WINDOW: freeze older objects during a compile
    bool native_below_python = false;     // MEMGUARD_NATIVE_BELOW_PYTHON: no native stack cut
};

/// Called once from the library constructor.
void install(const HookSettings& settings);

/// Whether a compile window may freeze objects, given gc.get_freeze_count() now and when the hook
/// started (`baseline`; -1: not known): only while the program has frozen nothing itself. CPython
/// 3.12 starts with a few hundred of its own tuples frozen, the baseline; a freeze of the
/// program's freezes every tracked object, so the count is then neither 0 nor the baseline (and a
/// failed call, -1, is no count at all).
inline bool compile_window_may_open(long freeze_count, long baseline) {
    return freeze_count == 0 || (freeze_count > 0 && freeze_count == baseline);
}

/// The recorder's Python stack provider: the calling thread's Python stack, interned (0 when
/// the thread does not hold the GIL or the interpreter is not running).
uint32_t capture_python_stack();

/// fork(2) handlers for the Python stack tables' lock, which a thread recording a stack holds
/// while it appends records (so it is taken before the recorder's own fork locks).
void lock_python_stacks_for_fork() noexcept;
void unlock_python_stacks_after_fork() noexcept;

}  // namespace memguard::python

// The embedded CPython hook (issue: release compile garbage).
//
// Activation: the library constructor calls install(). When the process is a CPython 3.10-3.14
// interpreter that has not initialized yet, an audit hook is added (PySys_AddAuditHook is legal
// before Py_Initialize). The hook does nothing until the interpreter is initialized; on the first
// audited event after that it sets up, on the "import" events after that it registers dynamo's
// compile callbacks once torch._dynamo.callback is loaded (dynamo.h), and it stops for good when
// finalization begins. In a process that is not Python nothing happens.
//
// Policy: a dynamo compile marks its own thread; the first safe point after the call that made it
// compile has returned runs one full gc.collect() (the rule: safe_point.h; its feeding from the
// interpreter: compile_marks.h). A compile that starts with no mark pending anywhere freezes the
// objects that already exist, so that this collection scans only what the compile made
// (compile_window.h).
//
// Accounting: a gc.callbacks entry turns every collection (automatic, explicit, memguard's) into
// a report record, with the CUDA bytes it freed read from PyTorch's allocated-bytes counter
// (gc_accounting.h).
#pragma once

#include <type_traits>

#include "common/config.h"

namespace memguard::track {
class Recorder;
}

namespace memguard::python {

struct HookSettings {
    bool collect_compile_garbage = true;  // MEMGUARD_COLLECT_COMPILE_GARBAGE
    bool python_stacks = true;            // Python frames on allocation records
    bool compile_window = true;           // MEMGUARD_COMPILE_WINDOW: freeze older objects during a compile
    bool native_below_python = false;     // MEMGUARD_NATIVE_BELOW_PYTHON: no native stack cut
    bool steps = true;                    // MEMGUARD_STEPS: optimizer step hooks and step moments
    bool explain_oom = true;              // MEMGUARD_EXPLAIN_OOM: PyTorch's OOM observer and OOM moments
    CyclesConfig cycles{};                // recompute and step triggers, the budget, explanations
};

/// Called once from the library constructor. `recorder` is what every part of python/ reports to,
/// for the life of the process.
/// HookSettings lives in a static the library constructor fills, maybe before static initialization
/// reached it: nothing in it may need a constructor.
static_assert(std::is_trivially_copyable_v<HookSettings>, "HookSettings must need no constructor");

void install(const HookSettings& settings, track::Recorder& recorder);

/// fork(2): python/'s locks, for the process's one fork function to take and release in lock
/// order. A thread recording a Python stack holds the stack tables' lock while it appends records
/// (so prepare_fork() runs before the recorder's own prepare). Each does nothing when the hook was
/// not installed with Python stacks.
void prepare_fork() noexcept;
void after_fork_parent() noexcept;
void after_fork_child() noexcept;

}  // namespace memguard::python

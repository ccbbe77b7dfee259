// Compile marks and the safe point: the interpreter's side of the rule in safe_point.h. dynamo's
// end-of-compile callback marks its thread and installs a C profile function on it; the profile
// function feeds the thread's frame events to the thread's CompileMark, reads the moment when the
// mark asks, and runs memguard's collection at the safe point. With no mark pending no profile
// function is installed. A user's profiler is never replaced. GIL held throughout.
#pragma once

#include <string>

namespace memguard::python {

struct PyObject;

/// From the hook's start-up: `sys` (for sys.getprofile). False when it lacks what it needs.
bool start_compile_marks(PyObject* sys);

/// Once dynamo is registered: finds the queries of the moment (torch._guards.CompileContext.try_get,
/// torch._C._dynamo.eval_frame.get_eval_frame_callback).
void learn_dynamo_queries();

/// dynamo's start-of-compile callback: opens the compile window when no thread has a mark pending.
void compile_started();

/// dynamo's end-of-compile callback (it runs under dynamo's non-reentrant callback lock, so this
/// only marks the thread and installs the profile function that waits for the safe point).
void compile_ended(const std::string& compile_id);

/// True when dynamo compiles on this thread or the thread is inside a torch.compile region (the
/// queries learn_dynamo_queries() found; false before). GIL held; errors are cleared.
bool dynamo_busy();

/// True while some thread has a compile mark pending (its collection has not run yet). GIL held.
bool compile_mark_pending();

}  // namespace memguard::python

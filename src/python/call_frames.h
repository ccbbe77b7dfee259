// What the compile marks read from the interpreter's frames (GIL held): where the call that made
// dynamo compile returns, and how a frame left.
#pragma once

#include "python/safe_point.h"

namespace memguard::python {

struct PyFrameObject;

/// The calling thread's frame depth, and the depth of the frame whose return means the compiling
/// call has returned: for a dynamo compile, the frame that called the frame being compiled (just
/// below the deepest convert_frame.py frame); for a lazy backward compile, the outermost
/// AOTAutograd runtime frame (CompiledFunction.backward), inside which the compiled backward
/// runs; -1 when neither is on the stack.
CallSite locate_compiling_call();

/// From the hook's start-up: learns what stopped_at_raise() needs (CPython 3.12 only).
void learn_exit_opcodes();

/// Whether a frame whose exit was reported with a value stopped at an instruction that raised.
/// On CPython 3.12 legacy profile events come from sys.monitoring, which reports a frame that an
/// exception leaves (PY_UNWIND) as a return with a value instead of NULL (None in 3.12.1, or the
/// exception: CPython gh-110892, fixed in 3.13), so the value cannot tell an exception's way out
/// from a return. The instruction the frame stopped at does: a return, or the one that raised. A
/// yield does not count as a return: an exception thrown into a generator paused there
/// (gen.throw, a contextmanager whose body raised) leaves it at the same instruction; a
/// generator's frame waits for a return instead. Always false on other versions, where the NULL
/// is reliable.
bool stopped_at_raise(PyFrameObject* frame);

}  // namespace memguard::python

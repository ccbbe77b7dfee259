// Steps, moments and out-of-memory context from the Python side (issue 20): the native functions
// that write the s, h, g, d, x and k records (format/records_insight.h), and the torch-side code
// (memguard_torch.py, embedded) that calls them: PyTorch's global optimizer step hooks, the tags of
// the live tensors at a moment, PyTorch's allocator snapshot and its out-of-memory observer.
//
// The torch side is installed with no code change, from the audit hook's "import" events, once
// torch.optim.optimizer defines register_optimizer_step_post_hook (torch >= 2.0). It runs in its
// own namespace (a module object named memguard._torch, not in sys.modules); the memguard module
// reaches it through `_torch()` (memguard.step()). GIL held throughout; nothing here is on a hook
// path.
#pragma once

#include <cstdint>

namespace memguard::track {
class Recorder;
}

namespace memguard::python {

struct PyObject;

/// Adds the insight natives (_step, _moment_begin, _tag, ...) to module object `mod`.
bool add_insight_natives(PyObject* mod);

/// From the audit hook's "import" events: installs the torch side once torch's optimizer module
/// is loaded, and afterwards forwards import events while the torch side asks for them.
bool torch_side_wants_imports();
void on_import_for_torch_side();

/// After an out-of-memory's x: flushes the report and, once per process, prints
/// `memguard: CUDA out of memory on device N: memguard oom <report>` to stderr. False when nothing
/// was printed. Any thread; no GIL needed.
bool oom_notice(track::Recorder& rec, int device);

/// Allocator mode's out-of-memory, as memguard's allocator saw it (alloc::OomReport).
struct AllocatorOomFigures {
    int device = 0;
    uint64_t requested = 0, rounded = 0, limit = 0, allocated = 0, reserved = 0;
    uint64_t device_free = 0, device_total = 0;  // 0: not known (a capture prevented asking)
    uint32_t stack_id = 0, python_stack_id = 0;
};
/// With the GIL held: the torch side writes an OOM moment with the live tensors' tags around the x
/// (no d records: PyTorch's allocator is not in use), flushes and prints the line. False when the
/// torch side is not installed or failed (the caller then writes the x itself).
bool allocator_oom_moment(const AllocatorOomFigures& f);

}  // namespace memguard::python

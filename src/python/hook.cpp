// Start-up and the audit hook: install() from the library constructor, the set-up on the first
// audited event once the interpreter runs, and the end at finalization.
#include "python/hook.h"

#include <cstring>

#include "common/log.h"
#include "python/allocator_mode.h"
#include "python/call_frames.h"
#include "python/capi.h"
#include "python/compile_marks.h"
#include "python/compile_window.h"
#include "python/dynamo.h"
#include "python/frames.h"
#include "python/gc_accounting.h"
#include "python/interpreter_paths.h"
#include "python/insight.h"
#include "python/module.h"
#include "python/pystack.h"
#include "python/state.h"
#include "track/recorder.h"

namespace memguard::python {

std::atomic<Phase> g_phase{Phase::NotPython};

namespace {

HookContext g_context;             // see state.h
bool g_fork_locks_stacks = false;  // the stack tables exist to lock: set by install(), read by the fork functions

PyObject* atexit_callback(PyObject*, PyObject*) {
    close_compile_window();
    g_phase.store(Phase::Finalizing, std::memory_order_release);
    return new_none();
}
PyMethodDef g_atexit_def{"memguard_atexit", atexit_callback, METH_NOARGS, nullptr};

void startup() {
    const CApi* a = capi();
    Ref gc(a->PyImport_ImportModule("gc"));
    Ref sys(a->PyImport_ImportModule("sys"));
    Ref atexit(a->PyImport_ImportModule("atexit"));
    if (!gc || !sys || !atexit) {
        a->PyErr_Clear();
        MG_LOG_WARN("cannot set up the Python hook (gc/sys/atexit unavailable); compile garbage is not collected");
        return;
    }
    start_compile_window(gc.get());
    Ref at(make_function(&g_atexit_def, nullptr));
    Ref reg(a->PyObject_GetAttrString(atexit.get(), "register"));
    if (!at || !reg || !start_compile_marks(sys.get()) || !start_gc_accounting(gc.get())) {
        a->PyErr_Clear();
        MG_LOG_WARN("cannot set up the Python hook; compile garbage is not collected");
        return;
    }
    Ref args(a->PyTuple_New(1));
    a->Py_IncRef(at.get());
    a->PyTuple_SetItem(args.get(), 0, at.get());
    Ref r(a->PyObject_CallObject(reg.get(), args.get()));
    a->PyErr_Clear();
    if (settings().python_stacks) recorder().set_python_stack_provider(&capture_python_stack);
    install_module();
    record_start_paths();
    learn_exit_opcodes();
    MG_LOG_DEBUG("Python hook active (CPython 3.{})", a->minor);
}

/// The GIL-free frame walker is checked against the public API once a Python frame runs (the
/// first audited events after start-up come from C, with no frame).
void calibrate_when_possible() {
    static bool done = false;
    if (done || !settings().python_stacks || !capi()->PyEval_GetFrame()) return;
    done = true;
    ErrorGuard keep_error;
    bool gil_free = calibrate_frames();
    MG_LOG_DEBUG("Python stacks on allocations: {}",
                 gil_free ? "from every thread with Python frames" : "only from threads that hold the GIL");
    // The interpreter's own frames under a Python caller say nothing the Python stack does not,
    // and unwinding them is most of a stack's cost in allocator mode. Only with the GIL-free
    // walker does every thread running Python get a Python stack to stand for them (PyTorch's
    // operators release the GIL).
    if (gil_free && !settings().native_below_python) {
        recorder().set_native_cut(track::object_range_of(reinterpret_cast<const void*>(capi()->PyEval_GetFrame)));
    }
}

int audit_hook(const char* event, PyObject*, void*) {
    Phase phase = g_phase.load(std::memory_order_acquire);
    if (phase == Phase::Finalizing || phase == Phase::NotPython) return 0;
    const CApi* a = capi();
    if (phase == Phase::WaitingForInit) {
        if (!a->Py_IsInitialized()) return 0;
        g_phase.store(Phase::Running, std::memory_order_release);
        ErrorGuard keep_error;
        startup();
    }
    calibrate_when_possible();
    if (event[0] == 'i' && allocator_install_pending() && std::strcmp(event, "import") == 0) {
        ErrorGuard keep_error;
        maybe_install_allocator();  // MEMGUARD_ALLOCATOR=memguard, once torch.cuda.memory has loaded
    }
    if (event[0] == 'i' && std::strcmp(event, "import") == 0) record_torch_paths_if_imported();
    if (event[0] == 'i' && torch_side_wants_imports() && std::strcmp(event, "import") == 0) {
        ErrorGuard keep_error;
        on_import_for_torch_side();  // optimizer step hooks, the OOM observer (insight.h)
    }
    if (event[0] == 'i' && !dynamo_registered() && std::strcmp(event, "import") == 0) {
        ErrorGuard keep_error;
        try_register_dynamo();
    } else if (event[0] == 'c' && std::strcmp(event, "cpython._PySys_ClearAuditHooks") == 0) {
        g_phase.store(Phase::Finalizing, std::memory_order_release);
    }
    return 0;
}

}  // namespace

const HookContext& hook_context() noexcept { return g_context; }

bool finalizing() { return g_phase.load(std::memory_order_acquire) != Phase::Running || capi()->Py_IsFinalizing(); }

void prepare_fork() noexcept {
    if (g_fork_locks_stacks) lock_stack_tables_for_fork();
}
void after_fork_parent() noexcept {
    if (g_fork_locks_stacks) unlock_stack_tables_after_fork();
}
void after_fork_child() noexcept {
    if (g_fork_locks_stacks) unlock_stack_tables_after_fork();
}

void install(const HookSettings& settings, track::Recorder& recorder) {
    const CApi* a = capi();
    if (!a->Py_IsInitialized) return;  // not a Python process
    if (!a->complete()) {
        MG_LOG_INFO("unsupported Python ({}); the Python hook stays off", a->Py_GetVersion ? a->Py_GetVersion() : "?");
        return;
    }
    if (a->Py_IsInitialized()) {
        MG_LOG_INFO("Python was initialized before memguard loaded; the Python hook needs LD_PRELOAD and stays off");
        return;
    }
    g_context.settings = settings;
    g_context.recorder = &recorder;
    if (settings.python_stacks) {
        g_fork_locks_stacks = true;  // runtime/fork.cpp's one fork function takes them
    }
    g_phase.store(Phase::WaitingForInit, std::memory_order_release);
    if (a->PySys_AddAuditHook(audit_hook, nullptr) != 0) {
        g_phase.store(Phase::NotPython, std::memory_order_release);
        MG_LOG_WARN("cannot add the Python audit hook; compile garbage is not collected");
    }
}

}  // namespace memguard::python

#include "python/compile_marks.h"

#include "common/log.h"
#include "python/call_frames.h"
#include "python/capi.h"
#include "python/compile_window.h"
#include "python/gc_accounting.h"
#include "python/safe_point.h"
#include "python/state.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

thread_local CompileMark t_mark;
PendingMarks g_pending;  // shared by every thread's mark; GIL-protected

// Strong references, kept for the life of the process; GIL-protected.
PyObject* g_sys_getprofile = nullptr;
PyObject* g_compile_context_try_get = nullptr;  // torch._guards.CompileContext.try_get
PyObject* g_get_eval_frame_callback = nullptr;  // torch._C._dynamo.eval_frame.get_eval_frame_callback

/// Calls a cached zero-argument callable and tells whether it returned something other than
/// None/False. Errors count as "not set".
bool returns_set(PyObject* fn) {
    if (!fn) return false;
    const CApi* a = capi();
    Ref v(a->PyObject_CallObject(fn, nullptr));
    if (!v) {
        a->PyErr_Clear();
        return false;
    }
    return v.get() != a->none && v.get() != a->false_;
}

void remove_profile() { capi()->PyEval_SetProfile(nullptr, nullptr); }

/// The safe point: memguard's collection, then the mark clears (and the compile window closes
/// once no thread has a mark pending).
void collect_at_safe_point() {
    collect_compile_garbage(t_mark);
    if (t_mark.collected(g_pending)) close_compile_window();
}

/// Profile function, installed on a thread only while it has a pending mark.
int profile_fn(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
    if (what == PyTrace_CALL) {
        t_mark.frame_called();
        return 0;
    }
    if (what != PyTrace_RETURN) return 0;
    CompileMark::Step step = t_mark.frame_returned(arg == nullptr ? Exit::Exception : Exit::Normal);
    if (step == CompileMark::Step::StopWatching || finalizing() || !settings().collect_compile_garbage) {
        remove_profile();
        return 0;
    }
    if (step != CompileMark::Step::AskMoment) return 0;
    Moment m;
    m.capture_active = recorder().captures().active() > 0;
    ErrorGuard keep_error;
    m.stopped_at_raise = stopped_at_raise(frame);
    m.dynamo_compiling = returns_set(g_compile_context_try_get);
    m.in_compiled_region = returns_set(g_get_eval_frame_callback);
    if (CompileMark::decide(m) != CompileMark::Step::Collect) return 0;
    collect_at_safe_point();
    remove_profile();
    return 0;
}

}  // namespace

bool start_compile_marks(PyObject* sys) {
    g_sys_getprofile = capi()->PyObject_GetAttrString(sys, "getprofile");
    return g_sys_getprofile != nullptr;
}

void learn_dynamo_queries() {
    const CApi* a = capi();
    g_compile_context_try_get = nullptr;
    {
        Ref ctx(module_attr("torch._guards", "CompileContext"));
        if (ctx) g_compile_context_try_get = a->PyObject_GetAttrString(ctx.get(), "try_get");
        a->PyErr_Clear();
    }
    g_get_eval_frame_callback = module_attr("torch._C._dynamo.eval_frame", "get_eval_frame_callback");
    a->PyErr_Clear();
}

void compile_started() {
    if (settings().collect_compile_garbage && settings().compile_window) open_compile_window(g_pending.threads);
}

bool dynamo_busy() {
    ErrorGuard keep_error;
    return returns_set(g_compile_context_try_get) || returns_set(g_get_eval_frame_callback);
}

bool compile_mark_pending() { return g_pending.threads > 0; }

void compile_ended(const std::string& compile_id) {
    const CApi* a = capi();
    recorder().record_compile(compile_id);
    t_mark.compile_ended(compile_id, locate_compiling_call(), track::monotonic_ns(), g_pending);
    MG_LOG_DEBUG("compile {} ended on thread {}: frame depth {}, compiling call returns below depth {}", compile_id,
                 track::current_tid(), t_mark.depth(), t_mark.boundary());
    if (!settings().collect_compile_garbage) return;
    // sys.getprofile() is None both when no profiler runs and when ours does (it has no object);
    // anything else is a profiler of the user's, which replaced or precedes ours.
    Ref current(a->PyObject_CallObject(g_sys_getprofile, nullptr));
    if (current && current.get() == a->none) {
        a->PyEval_SetProfile(profile_fn, nullptr);
        return;
    }
    a->PyErr_Clear();
    close_compile_window();  // no safe point will come on this thread: do not keep old objects frozen
    static bool warned = false;
    if (!warned) {
        warned = true;
        MG_LOG_INFO("a profiler is active on this thread; compile garbage is left to the automatic collector "
                    "while it runs");
    }
}

}  // namespace memguard::python

#include "python/hook.h"

#include <algorithm>
#include <cstring>
#include <pthread.h>
#include <string>
#include <vector>

#include "common/log.h"
#include "python/allocator_mode.h"
#include "python/capi.h"
#include "python/frames.h"
#include "python/module.h"
#include "python/state.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::python {

std::atomic<Phase> g_phase{Phase::NotPython};

namespace {

using track::Recorder;

HookSettings g_settings;

// Python objects memguard holds for the life of the process (strong references, never released:
// they are only touched with the GIL held and while the interpreter runs). Guarded by the GIL.
struct Objects {
    PyObject* gc_collect = nullptr;             // the original gc.collect
    PyObject* sys_getprofile = nullptr;
    PyObject* compile_context_try_get = nullptr;  // torch._guards.CompileContext.try_get
    PyObject* get_eval_frame_callback = nullptr;  // torch._C._dynamo.eval_frame.get_eval_frame_callback
    PyObject* end_callback = nullptr;            // ours, registered with dynamo
    PyObject* memory_stats = nullptr;            // torch._C._cuda_memoryStats
    PyObject* get_device = nullptr;              // torch._C._cuda_getDevice
    PyObject* gc_freeze = nullptr, *gc_unfreeze = nullptr, *gc_freeze_count = nullptr;
    PyObject* start_callback = nullptr;          // ours, registered with dynamo
    bool dynamo_registered = false;
};
Objects g_obj;

// --- the compile window ----------------------------------------------------------------------------
// A full collection costs time in proportion to every tracked object, and a PyTorch process holds
// hundreds of thousands of them; compile garbage is only objects made during the compile. So when
// a compile starts and no mark is pending anywhere, memguard freezes the objects that exist
// (gc.freeze(), O(1)); its collection at the safe point then scans only what was made since, and
// unfreezes right after. Objects older than the compile that became garbage meanwhile are left to
// the next ordinary collection. Never done when the program froze objects itself: the freeze count
// is then neither 0 nor what it was when the hook started (CPython 3.12 starts with 375 immortal
// tuples frozen; a window's gc.unfreeze() returns them to the oldest generation, and the next full
// collection moves them back, as 3.12's collector does with every immortal object it meets).
struct Freeze {
    bool active = false;
    int64_t since = 0;
    long baseline = -1;  // gc.get_freeze_count() when the hook started; -1: unknown (then only 0 opens)
    static constexpr int64_t kMaxNs = 30LL * 1000000000LL;  // safety net: thaw a forgotten window
};
Freeze g_freeze;
int g_pending_marks = 0;  // threads with a pending mark (GIL-protected)

bool call_ok(PyObject* fn) {
    if (!fn) return false;
    Ref r(capi()->PyObject_CallObject(fn, nullptr));
    if (!r) capi()->PyErr_Clear();
    return static_cast<bool>(r);
}

void thaw() {
    if (!g_freeze.active) return;
    g_freeze.active = false;
    call_ok(g_obj.gc_unfreeze);
}

void maybe_freeze_for_compile() {
    const CApi* a = capi();
    if (g_freeze.active || g_pending_marks > 0 || !g_obj.gc_freeze_count) return;
    Ref count(a->PyObject_CallObject(g_obj.gc_freeze_count, nullptr));
    long n = count ? a->PyLong_AsLong(count.get()) : -1;
    if (!compile_window_may_open(n, g_freeze.baseline)) {
        // The program froze objects itself (or the call failed): leave its freeze alone.
        a->PyErr_Clear();
        MG_LOG_DEBUG("compile window: {} objects are frozen (the interpreter froze {} before the program ran); "
                     "the collection will scan every object",
                     n, g_freeze.baseline);
        return;
    }
    if (call_ok(g_obj.gc_freeze)) {
        g_freeze.active = true;
        g_freeze.since = track::monotonic_ns();
        MG_LOG_DEBUG("compile window opened: older objects frozen until the compile's garbage is collected");
    }
}

// --- per-thread compile marks -----------------------------------------------------------------
struct Mark {
    bool pending = false;
    bool profiling = false;  // our profile function is installed on this thread
    int64_t first_t = 0;
    std::string compile_ids;
    // Where the compiling call returns: the depth of the frame that called the compiled frame
    // (below dynamo's convert_frame machinery), or -1 when none is on the stack (a lazy backward
    // compile on the autograd thread). `depth` follows the thread's frame depth through the
    // profile function's call and return events.
    int boundary = -1;
    int depth = 0;
};
thread_local Mark t_mark;

using Trigger = format::GcTrigger;  // format/vocabulary.h
thread_local Trigger t_trigger = Trigger::Automatic;

PyObject* new_none() {
    capi()->Py_IncRef(capi()->none);
    return capi()->none;
}

PyObject* make_function(PyMethodDef* def, PyObject* self) { return capi()->PyCFunction_NewEx(def, self, nullptr); }

PyObject* module_attr(const char* module, const char* attr) {
    const CApi* a = capi();
    Ref name(a->PyUnicode_FromString(module));
    Ref mod(name ? a->PyImport_GetModule(name.get()) : nullptr);
    if (!mod) return nullptr;
    return a->PyObject_GetAttrString(mod.get(), attr);
}

bool finalizing() {
    const CApi* a = capi();
    return g_phase.load(std::memory_order_acquire) != Phase::Running || a->Py_IsFinalizing();
}

// --- the collection and its accounting -----------------------------------------------------------

struct GcWindow {  // the collection in progress (collections never nest; GIL held)
    int64_t t0 = 0;
    int64_t cuda_before = -1;
    Trigger trigger = Trigger::Automatic;
    int generation = 0;
    int64_t mark_age_ns = -1;  // memguard's collections: time from the first mark to the start
};
GcWindow g_gc;

/// PyTorch's allocated-bytes counter for the current device, or -1 when CUDA is not in use by
/// the native allocator (a pluggable allocator raises). Read as
/// torch._C._cuda_memoryStats(device)["allocated_bytes"]["all"]["current"], the counter
/// torch.cuda.memory_allocated() returns, without that function's flattening of every statistic in
/// Python (about 0.2 ms a call on the H200, and this runs twice per collection). Never initializes
/// CUDA: only read once memguard saw a GPU allocation.
int64_t cuda_allocated_bytes() {
    if (!Recorder::instance().gpu_seen()) return -1;
    const CApi* a = capi();
    if (!g_obj.memory_stats) {
        g_obj.memory_stats = module_attr("torch._C", "_cuda_memoryStats");
        g_obj.get_device = module_attr("torch._C", "_cuda_getDevice");
        if (!g_obj.memory_stats || !g_obj.get_device) {
            a->PyErr_Clear();
            return -1;
        }
    }
    Ref device(a->PyObject_CallObject(g_obj.get_device, nullptr));
    Ref args(device ? a->PyTuple_New(1) : nullptr);
    if (!args) {
        a->PyErr_Clear();
        return -1;
    }
    a->PyTuple_SetItem(args.get(), 0, device.release());  // steals the reference
    Ref stats(a->PyObject_CallObject(g_obj.memory_stats, args.get()));
    PyObject* bytes = stats ? a->PyDict_GetItemString(stats.get(), "allocated_bytes") : nullptr;  // borrowed
    PyObject* all = bytes ? a->PyDict_GetItemString(bytes, "all") : nullptr;
    PyObject* current = all ? a->PyDict_GetItemString(all, "current") : nullptr;
    long long value = current ? a->PyLong_AsLongLong(current) : -1;
    if (value < 0) {
        a->PyErr_Clear();
        return -1;
    }
    return value;
}

long long dict_int(PyObject* dict, const char* key) {
    PyObject* v = capi()->PyDict_GetItemString(dict, key);  // borrowed
    return v ? capi()->PyLong_AsLongLong(v) : 0;
}

/// gc.callbacks entry: callback(phase, info).
PyObject* gc_callback(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (finalizing() || a->PyTuple_Size(args) != 2) return new_none();
    ErrorGuard keep_error;
    const char* phase = a->PyUnicode_AsUTF8(a->PyTuple_GetItem(args, 0));
    PyObject* info = a->PyTuple_GetItem(args, 1);
    if (!phase || !info) return new_none();
    if (std::strcmp(phase, "start") == 0) {
        set_collecting_on_this_thread(true);  // allocator mode: frees from here on are marked gc
        g_gc.t0 = track::monotonic_ns();
        if (g_freeze.active && g_gc.t0 - g_freeze.since > Freeze::kMaxNs && t_trigger != Trigger::Memguard) {
            // A window nobody closed (its thread ended with a mark pending): thaw so that the
            // next collections see every object again. (gc.unfreeze only moves lists: safe here.)
            thaw();
        }
        g_gc.trigger = t_trigger;
        g_gc.generation = static_cast<int>(dict_int(info, "generation"));
        g_gc.cuda_before = cuda_allocated_bytes();
        g_gc.mark_age_ns = t_trigger == Trigger::Memguard ? g_gc.t0 - t_mark.first_t : -1;
        return new_none();
    }
    set_collecting_on_this_thread(false);
    Recorder::Collection c;
    c.trigger = g_gc.trigger;
    c.generation = g_gc.generation;
    c.duration_ns = track::monotonic_ns() - g_gc.t0;
    c.collected = dict_int(info, "collected");
    c.uncollectable = dict_int(info, "uncollectable");
    int64_t after = g_gc.cuda_before >= 0 ? cuda_allocated_bytes() : -1;
    c.cuda_bytes_freed = after >= 0 ? g_gc.cuda_before - after : -1;
    c.mark_age_ns = g_gc.mark_age_ns;
    if (g_gc.trigger == Trigger::Memguard) c.compile_ids = t_mark.compile_ids;
    Recorder::instance().record_collection(c);
    if (g_gc.trigger == Trigger::Memguard) {
        MG_LOG_DEBUG("collected compile garbage of {} on thread {}: {} objects, {} CUDA bytes freed, {:.3f} ms, "
                     "{:.3f} s after the compile",
                     c.compile_ids, track::current_tid(), c.collected, c.cuda_bytes_freed, c.duration_ns / 1e6,
                     c.mark_age_ns / 1e9);
    }
    return new_none();
}
PyMethodDef g_gc_callback_def{"memguard_gc_callback", gc_callback, METH_VARARGS, nullptr};

/// Replaces gc.collect: the same call, marked as an explicit collection for the accounting.
PyObject* gc_collect_wrapper(PyObject* original, PyObject* args, PyObject* kwargs) {
    Trigger saved = t_trigger;
    if (t_trigger == Trigger::Automatic) t_trigger = Trigger::Explicit;
    PyObject* r = capi()->PyObject_Call(original, args, kwargs);
    t_trigger = saved;
    return r;
}
PyMethodDef g_gc_collect_def{"collect", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(gc_collect_wrapper)),
                             METH_VARARGS | METH_KEYWORDS,
                             "collect([generation]) -> n\n\nRun the garbage collector (wrapped by memguard for "
                             "accounting; behaves as gc.collect)."};

// --- safe points -------------------------------------------------------------------------------

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

void remove_profile() {
    capi()->PyEval_SetProfile(nullptr, nullptr);
    t_mark.profiling = false;
}

void collect_now() {
    const CApi* a = capi();
    t_trigger = Trigger::Memguard;
    Ref r(a->PyObject_CallObject(g_obj.gc_collect, nullptr));
    if (!r) a->PyErr_Clear();
    t_trigger = Trigger::Automatic;
    if (t_mark.pending && g_pending_marks > 0) --g_pending_marks;
    if (g_pending_marks == 0) thaw();
    Mark cleared;
    cleared.profiling = t_mark.profiling;
    t_mark = cleared;
}

enum class FrameRole { Other, ConvertFrame, AotRuntime };

/// dynamo's frame callback (torch/_dynamo/convert_frame.py) or AOTAutograd's runtime wrappers
/// (torch/_functorch/_aot_autograd/, where a lazy backward compile starts).
FrameRole frame_role(PyFrameObject* f) {
    const CApi* a = capi();
    Ref code(reinterpret_cast<PyObject*>(a->PyFrame_GetCode(f)));
    Ref name(code ? a->PyObject_GetAttrString(code.get(), "co_filename") : nullptr);
    const char* s = name ? a->PyUnicode_AsUTF8(name.get()) : nullptr;
    if (!s) {
        a->PyErr_Clear();
        return FrameRole::Other;
    }
    size_t n = std::strlen(s);
    static constexpr char kConvert[] = "_dynamo/convert_frame.py";
    if (n >= sizeof(kConvert) - 1 && std::strcmp(s + n - (sizeof(kConvert) - 1), kConvert) == 0) {
        return FrameRole::ConvertFrame;
    }
    return std::strstr(s, "_functorch/_aot_autograd/") ? FrameRole::AotRuntime : FrameRole::Other;
}

// How a frame left, on CPython 3.12: its legacy profile events come from sys.monitoring, which
// reports a frame that an exception leaves (PY_UNWIND) as a return with a value instead of NULL
// (None in 3.12.1, or the exception: CPython gh-110892, fixed in 3.13), so the value cannot tell
// an exception's way out from a return. The instruction the frame stopped at does: a return, or
// the one that raised. A yield does not count: an exception thrown into a generator paused there
// (gen.throw, a contextmanager whose body raised) leaves it at the same instruction; a generator's
// frame waits for a return instead. Opcodes from the interpreter's own `opcode.opmap`; unknown
// (not needed) on other versions, where the NULL is reliable.
struct ExitOpcodes {
    long return_value = -1, return_const = -1;
    bool known() const { return return_value >= 0; }
};
ExitOpcodes g_exit_ops;

void learn_exit_opcodes() {
    const CApi* a = capi();
    if (a->minor != 12 || !a->PyFrame_GetLasti || !a->PyCode_GetCode || !a->PyBytes_AsString || !a->PyBytes_Size)
        return;
    Ref opcode(a->PyImport_ImportModule("opcode"));
    Ref opmap(opcode ? a->PyObject_GetAttrString(opcode.get(), "opmap") : nullptr);
    auto op = [&](const char* name) -> long {
        PyObject* v = opmap ? a->PyDict_GetItemString(opmap.get(), name) : nullptr;  // borrowed
        return v ? a->PyLong_AsLong(v) : -1;
    };
    g_exit_ops.return_value = op("RETURN_VALUE");
    g_exit_ops.return_const = op("RETURN_CONST");
    a->PyErr_Clear();
}

/// Whether a frame whose exit was reported with a value returned rather than let an exception
/// through. Only where g_exit_ops are known (3.12).
bool left_normally(PyFrameObject* frame) {
    const CApi* a = capi();
    const int lasti = a->PyFrame_GetLasti(frame);  // bytes into co_code
    if (lasti < 0) return false;
    Ref code(reinterpret_cast<PyObject*>(a->PyFrame_GetCode(frame)));
    Ref bytes(code ? a->PyCode_GetCode(reinterpret_cast<PyCodeObject*>(code.get())) : nullptr);
    const char* p = bytes ? a->PyBytes_AsString(bytes.get()) : nullptr;
    if (!p || lasti >= a->PyBytes_Size(bytes.get())) {
        a->PyErr_Clear();
        return false;  // unknown: the mark waits for a return that says what it is
    }
    const long op = static_cast<unsigned char>(p[lasti]);
    return op == g_exit_ops.return_value || op == g_exit_ops.return_const;
}

/// Profile function, installed on a thread only while it has a pending mark.
int profile_fn(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
    if (what == PyTrace_CALL) {
        ++t_mark.depth;
        return 0;
    }
    if (what != PyTrace_RETURN) return 0;
    // The returning frame is at t_mark.depth. Everything deeper than the boundary (the frame that
    // called the compiled frame) is the compiled call itself or dynamo's machinery around it, whose
    // helper frames return with no torch.compile region set; the compiled call has surely returned
    // once the boundary frame or a shallower one returns.
    bool returned_to_caller = t_mark.boundary < 0 || t_mark.depth <= t_mark.boundary;
    --t_mark.depth;
    if (!t_mark.pending || finalizing() || !g_settings.collect_compile_garbage) {
        remove_profile();
        return 0;
    }
    if (!returned_to_caller) return 0;
    if (arg == nullptr) return 0;  // an exception is propagating: the mark waits for a normal return
    if (Recorder::instance().captures().active() > 0) return 0;  // collect once no stream captures
    ErrorGuard keep_error;
    if (g_exit_ops.known() && !left_normally(frame)) return 0;  // (3.12: the same, told by the frame)
    if (returns_set(g_obj.compile_context_try_get)) return 0;  // dynamo is compiling on this thread
    if (returns_set(g_obj.get_eval_frame_callback)) return 0;  // still inside a torch.compile region
    collect_now();
    remove_profile();
    return 0;
}

// --- dynamo ----------------------------------------------------------------------------------------

std::string compile_id_of(PyObject* args) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) < 1) return "?";
    Ref id(a->PyObject_GetAttrString(a->PyTuple_GetItem(args, 0), "compile_id"));
    if (!id) {
        a->PyErr_Clear();
        return "?";
    }
    Ref str(a->PyObject_Str(id.get()));
    const char* s = str ? a->PyUnicode_AsUTF8(str.get()) : nullptr;
    return s ? s : "?";
}

/// Sets the mark's depth to the current frame depth and its boundary to the depth of the frame
/// whose return means the compiling call has returned: for a dynamo compile, the frame that called
/// the frame being compiled (just below the deepest convert_frame.py frame); for a lazy backward
/// compile, the outermost AOTAutograd runtime frame (CompiledFunction.backward), inside which the
/// compiled backward runs; -1 when neither is on the stack.
void locate_compiling_call() {
    const CApi* a = capi();
    std::vector<FrameRole> roles;  // top first
    PyFrameObject* f = a->PyEval_GetFrame();
    if (f) a->Py_IncRef(reinterpret_cast<PyObject*>(f));
    while (f) {
        roles.push_back(frame_role(f));
        PyFrameObject* back = a->PyFrame_GetBack(f);
        a->Py_DecRef(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    int depth = static_cast<int>(roles.size());  // the top frame's depth (bottom frame: 1)
    int convert_boundary = -1, aot_boundary = -1;
    for (int i = depth - 1; i >= 0; --i) {  // from the bottom up
        int frame_depth = depth - i;
        FrameRole role = roles[static_cast<size_t>(i)];
        if (role == FrameRole::ConvertFrame && convert_boundary < 0) convert_boundary = frame_depth - 1;
        if (role == FrameRole::AotRuntime && aot_boundary < 0) aot_boundary = frame_depth;
    }
    int boundary = convert_boundary >= 0 ? convert_boundary : aot_boundary;
    t_mark.depth = depth;
    // Compiles that share one collection wait for the outermost compiling call.
    int old = t_mark.pending ? t_mark.boundary : -1;
    t_mark.boundary = old < 0 ? boundary : (boundary < 0 ? old : std::min(old, boundary));
}

/// dynamo's end-of-compile callback. It runs under dynamo's non-reentrant callback lock, so it
/// only marks the thread (and installs the profile function that waits for the safe point).
PyObject* end_callback(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (finalizing()) return new_none();
    ErrorGuard keep_error;
    std::string id = compile_id_of(args);  // torch >= 2.8 passes CallbackArgs; older, nothing
    Recorder::instance().record_compile(id);
    locate_compiling_call();
    MG_LOG_DEBUG("compile {} ended on thread {}: frame depth {}, compiling call returns below depth {}", id,
                 track::current_tid(), t_mark.depth, t_mark.boundary);
    if (!t_mark.pending) {
        t_mark.first_t = track::monotonic_ns();
        ++g_pending_marks;
    }
    t_mark.pending = true;
    if (t_mark.compile_ids.size() < 4096) {
        if (!t_mark.compile_ids.empty()) t_mark.compile_ids.push_back(',');
        t_mark.compile_ids += id;
    }
    if (g_settings.collect_compile_garbage) {
        // sys.getprofile() is None both when no profiler runs and when ours does (it has no
        // object); anything else is a profiler of the user's, which replaced or precedes ours.
        Ref current(a->PyObject_CallObject(g_obj.sys_getprofile, nullptr));
        if (current && current.get() == a->none) {
            a->PyEval_SetProfile(profile_fn, nullptr);
            t_mark.profiling = true;
        } else {
            t_mark.profiling = false;
            a->PyErr_Clear();
            thaw();  // no safe point will come on this thread: do not keep old objects frozen
            static bool warned = false;
            if (!warned) {
                warned = true;
                MG_LOG_INFO("a profiler is active on this thread; compile garbage is left to the automatic "
                            "collector while it runs");
            }
        }
    }
    return new_none();
}
PyMethodDef g_end_callback_def{"memguard_compile_end", end_callback, METH_VARARGS, nullptr};

/// dynamo's start-of-compile callback: opens the compile window (see Freeze). Runs under the same
/// lock as the end callback; does nothing else.
PyObject* start_callback(PyObject*, PyObject*) {
    if (!finalizing() && g_settings.collect_compile_garbage && g_settings.compile_window) {
        ErrorGuard keep_error;
        maybe_freeze_for_compile();
    }
    return new_none();
}
PyMethodDef g_start_callback_def{"memguard_compile_start", start_callback, METH_VARARGS, nullptr};

void register_one(PyObject* handler, const char* method, PyObject* callback) {
    const CApi* a = capi();
    Ref reg(a->PyObject_GetAttrString(handler, method));
    Ref args(a->PyTuple_New(1));
    if (!reg || !args || !callback) {
        a->PyErr_Clear();
        return;
    }
    a->Py_IncRef(callback);
    a->PyTuple_SetItem(args.get(), 0, callback);  // steals the reference
    Ref r(a->PyObject_CallObject(reg.get(), args.get()));
    if (!r) a->PyErr_Clear();
}

void register_end_callback(PyObject* handler) {
    register_one(handler, "register_start_callback", g_obj.start_callback);
    register_one(handler, "register_end_callback", g_obj.end_callback);
}

/// Replaces callback_handler.clear (torch._dynamo.reset() calls it): clears, then registers
/// memguard's callback again. `self` is (original clear, handler).
PyObject* clear_wrapper(PyObject* self, PyObject* args) {
    const CApi* a = capi();
    PyObject* original = a->PyTuple_GetItem(self, 0);
    PyObject* handler = a->PyTuple_GetItem(self, 1);
    PyObject* r = a->PyObject_CallObject(original, args);
    if (r && !finalizing()) {
        ErrorGuard keep_error;
        register_end_callback(handler);
    }
    return r;
}
PyMethodDef g_clear_def{"clear", clear_wrapper, METH_VARARGS, "callback_handler.clear, wrapped by memguard"};

void try_register_dynamo() {
    const CApi* a = capi();
    Ref handler(module_attr("torch._dynamo.callback", "callback_handler"));
    if (!handler) {
        a->PyErr_Clear();
        return;
    }
    g_obj.compile_context_try_get = nullptr;
    {
        Ref ctx(module_attr("torch._guards", "CompileContext"));
        if (ctx) g_obj.compile_context_try_get = a->PyObject_GetAttrString(ctx.get(), "try_get");
        a->PyErr_Clear();
    }
    g_obj.get_eval_frame_callback = module_attr("torch._C._dynamo.eval_frame", "get_eval_frame_callback");
    a->PyErr_Clear();
    g_obj.end_callback = make_function(&g_end_callback_def, nullptr);
    g_obj.start_callback = make_function(&g_start_callback_def, nullptr);
    Ref original_clear(a->PyObject_GetAttrString(handler.get(), "clear"));
    Ref pair(a->PyTuple_New(2));
    if (!g_obj.end_callback || !original_clear || !pair) {
        a->PyErr_Clear();
        return;
    }
    a->PyTuple_SetItem(pair.get(), 0, original_clear.release());
    a->Py_IncRef(handler.get());
    a->PyTuple_SetItem(pair.get(), 1, handler.get());
    Ref wrapped(make_function(&g_clear_def, pair.get()));
    if (!wrapped || a->PyObject_SetAttrString(handler.get(), "clear", wrapped.get()) != 0) {
        a->PyErr_Clear();
        return;
    }
    register_end_callback(handler.get());
    g_obj.dynamo_registered = true;
    MG_LOG_DEBUG("registered with torch._dynamo's compile callbacks");
}

// --- start-up and the audit hook -----------------------------------------------------------------

PyObject* atexit_callback(PyObject*, PyObject*) {
    thaw();
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
    g_obj.sys_getprofile = a->PyObject_GetAttrString(sys.get(), "getprofile");
    g_obj.gc_collect = a->PyObject_GetAttrString(gc.get(), "collect");
    g_obj.gc_freeze = a->PyObject_GetAttrString(gc.get(), "freeze");
    g_obj.gc_unfreeze = a->PyObject_GetAttrString(gc.get(), "unfreeze");
    g_obj.gc_freeze_count = a->PyObject_GetAttrString(gc.get(), "get_freeze_count");
    if (g_obj.gc_freeze_count) {
        Ref count(a->PyObject_CallObject(g_obj.gc_freeze_count, nullptr));
        g_freeze.baseline = count ? a->PyLong_AsLong(count.get()) : -1;
    }
    a->PyErr_Clear();
    Ref callbacks(a->PyObject_GetAttrString(gc.get(), "callbacks"));
    Ref cb(make_function(&g_gc_callback_def, nullptr));
    Ref wrapper(make_function(&g_gc_collect_def, g_obj.gc_collect));
    Ref at(make_function(&g_atexit_def, nullptr));
    Ref reg(a->PyObject_GetAttrString(atexit.get(), "register"));
    if (!g_obj.sys_getprofile || !g_obj.gc_collect || !callbacks || !cb || !wrapper || !at || !reg) {
        a->PyErr_Clear();
        MG_LOG_WARN("cannot set up the Python hook; compile garbage is not collected");
        return;
    }
    a->PyList_Append(callbacks.get(), cb.get());
    a->PyObject_SetAttrString(gc.get(), "collect", wrapper.get());
    Ref args(a->PyTuple_New(1));
    a->Py_IncRef(at.get());
    a->PyTuple_SetItem(args.get(), 0, at.get());
    Ref r(a->PyObject_CallObject(reg.get(), args.get()));
    a->PyErr_Clear();
    if (g_settings.python_stacks) Recorder::instance().set_python_stack_provider(&capture_python_stack);
    install_module();
    learn_exit_opcodes();
    MG_LOG_DEBUG("Python hook active (CPython 3.{})", a->minor);
}

/// The GIL-free frame walker is checked against the public API once a Python frame runs (the
/// first audited events after start-up come from C, with no frame).
void calibrate_when_possible() {
    static bool done = false;
    if (done || !g_settings.python_stacks || !capi()->PyEval_GetFrame()) return;
    done = true;
    ErrorGuard keep_error;
    bool gil_free = calibrate_frames();
    MG_LOG_DEBUG("Python stacks on allocations: {}",
                 gil_free ? "from every thread with Python frames" : "only from threads that hold the GIL");
    // The interpreter's own frames under a Python caller say nothing the Python stack does not,
    // and unwinding them is most of a stack's cost in allocator mode. Only with the GIL-free
    // walker does every thread running Python get a Python stack to stand for them (PyTorch's
    // operators release the GIL).
    if (gil_free && !g_settings.native_below_python) {
        Recorder::instance().set_native_cut(
            track::object_range_of(reinterpret_cast<const void*>(capi()->PyEval_GetFrame)));
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
    if (event[0] == 'i' && !g_obj.dynamo_registered && std::strcmp(event, "import") == 0) {
        ErrorGuard keep_error;
        try_register_dynamo();
    } else if (event[0] == 'c' && std::strcmp(event, "cpython._PySys_ClearAuditHooks") == 0) {
        g_phase.store(Phase::Finalizing, std::memory_order_release);
    }
    return 0;
}

}  // namespace

void install(const HookSettings& settings) {
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
    g_settings = settings;
    if (settings.python_stacks) {
        // Registered after the recorder's handlers, so this prepare handler runs before theirs:
        // a thread recording a Python stack holds this lock while it takes the writer's.
        pthread_atfork(&lock_python_stacks_for_fork, &unlock_python_stacks_after_fork,
                       &unlock_python_stacks_after_fork);
    }
    g_phase.store(Phase::WaitingForInit, std::memory_order_release);
    if (a->PySys_AddAuditHook(audit_hook, nullptr) != 0) {
        g_phase.store(Phase::NotPython, std::memory_order_release);
        MG_LOG_WARN("cannot add the Python audit hook; compile garbage is not collected");
    }
}

}  // namespace memguard::python

#include "python/gc_accounting.h"

#include <array>
#include <cstring>
#include <optional>

#include "common/log.h"
#include "format/vocabulary.h"
#include "python/allocator_mode.h"
#include "python/capi.h"
#include "python/compile_window.h"
#include "python/gc_budget.h"
#include "python/safe_point.h"
#include "python/state.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

// The collection trigger, as the report names it (format/vocabulary.h).
using Trigger = format::GcTrigger;

thread_local Trigger t_trigger = Trigger::Automatic;

PyObject* g_gc_collect = nullptr;    // the original gc.collect (a strong reference, never released)
PyObject* g_explainer = nullptr;     // memguard_explain.py's explained_collect, once the torch side runs
PyObject* g_memory_stats = nullptr;  // torch._C._cuda_memoryStats, once looked up
PyObject* g_get_device = nullptr;    // torch._C._cuda_getDevice

struct GcWindow {  // a collection in progress
    int64_t t0 = 0;
    int64_t cuda_before = -1;
    Trigger trigger = Trigger::Automatic;
    int generation = 0;
    int64_t mark_age_ns = -1;  // memguard's compile collections: time from the first mark to the start
    // Owned windows (below): the collections seen inside it.
    int passes = 0;
    int64_t collected = 0, uncollectable = 0;
};
GcWindow g_gc;  // the callbacks' window: collections never nest; GIL held

// An owned window: one of memguard's collections (or an explained gc.collect() of the program),
// opened and closed by its caller around everything it runs, so that an explanation's two passes
// and the look between them are one Y. Per thread: while the explanation's Python code runs, the
// interpreter may switch threads, and another thread's collection then uses g_gc.
thread_local GcWindow t_own;
thread_local bool t_own_open = false;
thread_local uint32_t t_explain = 0;  // the explanation written inside the owned window (0: none)

GcBudget g_budget;                                              // memguard's triggers' time budget; GIL held
std::array<uint64_t, GcBudget::kTriggers> g_skipped_at_last{};  // per kind: skips counted at its last collection

GcBudget::Kind budget_kind(Trigger t) {
    switch (t) {
    case Trigger::Recompute: return GcBudget::Kind::Recompute;
    case Trigger::Step: return GcBudget::Kind::Step;
    default: return GcBudget::Kind::Compile;
    }
}

/// PyTorch's allocated-bytes counter for the current device, or -1 when CUDA is not in use by
/// the native allocator (a pluggable allocator raises). Read as
/// torch._C._cuda_memoryStats(device)["allocated_bytes"]["all"]["current"], the counter
/// torch.cuda.memory_allocated() returns, without that function's flattening of every statistic in
/// Python (about 0.2 ms a call on the H200, and this runs twice per collection). Never initializes
/// CUDA: only read once memguard saw a GPU allocation.
int64_t cuda_allocated_bytes() {
    if (!recorder().gpu_seen()) return -1;
    const CApi* a = capi();
    if (!g_memory_stats || !g_get_device) {
        if (!g_memory_stats) g_memory_stats = module_attr("torch._C", "_cuda_memoryStats");
        if (!g_get_device) g_get_device = module_attr("torch._C", "_cuda_getDevice");
        if (!g_memory_stats || !g_get_device) {  // both are needed; looked up again next time
            a->PyErr_Clear();
            return -1;
        }
    }
    Ref device(a->PyObject_CallObject(g_get_device, nullptr));
    Ref args(device ? a->PyTuple_New(1) : nullptr);
    if (!args) {
        a->PyErr_Clear();
        return -1;
    }
    a->PyTuple_SetItem(args.get(), 0, device.release());  // steals the reference
    Ref stats(a->PyObject_CallObject(g_memory_stats, args.get()));
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

void open_window(GcWindow& w, Trigger trigger, int generation, int64_t mark_age_ns) {
    set_collecting_on_this_thread(true);  // allocator mode: frees from here on are marked gc
    w = GcWindow{};
    w.t0 = track::monotonic_ns();
    if (!format::is_memguards(trigger)) close_forgotten_compile_window(w.t0);
    w.trigger = trigger;
    w.generation = generation;
    w.cuda_before = cuda_allocated_bytes();
    w.mark_age_ns = mark_age_ns;
    recorder().watch_thread_frees(track::current_tid());
}

/// Closes a window: what it freed, as its record says it.
track::Recorder::Collection close_window(const GcWindow& w) {
    set_collecting_on_this_thread(false);
    track::Recorder::Collection c;
    c.trigger = w.trigger;
    c.generation = w.generation;
    c.duration_ns = track::monotonic_ns() - w.t0;
    c.collected = w.collected;
    c.uncollectable = w.uncollectable;
    int64_t after = w.cuda_before >= 0 ? cuda_allocated_bytes() : -1;
    c.cuda_bytes_freed = after >= 0 ? w.cuda_before - after : -1;
    // The GPU bytes memguard's hooks saw freed on this thread during the collection: memory freed
    // outside PyTorch's allocator (cudaFree by another library; a program without torch), which
    // PyTorch's counter does not see. Only this thread's frees: the collection and the finalizers
    // it runs are on this thread (it holds the GIL), while a free on another thread in the window
    // is that thread's own doing. The larger figure is kept, never the sum: a finalizer that
    // empties PyTorch's cache would count its bytes twice.
    const uint64_t seen = recorder().watched_thread_freed();
    recorder().watch_thread_frees(0);
    if (seen > 0 && static_cast<int64_t>(seen) > c.cuda_bytes_freed) c.cuda_bytes_freed = static_cast<int64_t>(seen);
    c.mark_age_ns = w.mark_age_ns;
    return c;
}

void collection_started(PyObject* info) {
    if (t_own_open) {  // a pass of an owned window: the first one gives the generation
        if (t_own.passes++ == 0) t_own.generation = static_cast<int>(dict_int(info, "generation"));
        return;
    }
    open_window(g_gc, t_trigger, static_cast<int>(dict_int(info, "generation")), -1);
}

void collection_stopped(PyObject* info) {
    if (t_own_open) {  // the first pass's count is the collection's (the second frees what it saved)
        if (t_own.passes == 1) t_own.collected = dict_int(info, "collected");
        t_own.uncollectable += dict_int(info, "uncollectable");
        return;
    }
    g_gc.collected = dict_int(info, "collected");
    g_gc.uncollectable = dict_int(info, "uncollectable");
    recorder().record_collection(close_window(g_gc));
}

/// Runs `collect` (the original gc.collect, or the explainer around it) in an owned window and
/// records one Y; returns the call's result (a new reference; null with an error set).
PyObject* run_owned(Trigger trigger, int generation, const CompileMark* mark, bool explain,
                    std::optional<uint64_t> skipped) {
    const CApi* a = capi();
    open_window(t_own, trigger, generation, mark ? mark->age_ns(track::monotonic_ns()) : -1);
    t_own_open = true;
    t_explain = 0;
    Ref gen(a->PyLong_FromLongLong(generation));
    PyObject* r = nullptr;
    if (explain && g_explainer && gen) {
        Ref min_bytes(a->PyLong_FromLongLong(static_cast<long long>(settings().cycles.explain_min_bytes)));
        Ref args(min_bytes ? a->PyTuple_New(3) : nullptr);
        if (args) {
            a->Py_IncRef(g_gc_collect);
            a->PyTuple_SetItem(args.get(), 0, g_gc_collect);  // steals
            a->PyTuple_SetItem(args.get(), 1, gen.release());
            a->PyTuple_SetItem(args.get(), 2, min_bytes.release());
            r = a->PyObject_CallObject(g_explainer, args.get());
        }
    } else if (gen) {
        Ref args(a->PyTuple_New(1));
        if (args) {
            a->PyTuple_SetItem(args.get(), 0, gen.release());
            r = a->PyObject_CallObject(g_gc_collect, args.get());
        }
    }
    t_own_open = false;
    if (t_own.passes == 0) t_own.generation = generation;
    track::Recorder::Collection c = close_window(t_own);
    if (trigger == Trigger::Memguard && mark) c.compile_ids = mark->compile_ids();
    c.skipped = skipped;
    c.explain = t_explain;
    t_explain = 0;
    recorder().record_collection(c);
    if (format::is_memguards(trigger)) {
        g_budget.charge(budget_kind(trigger), c.duration_ns, c.cuda_bytes_freed, track::monotonic_ns());
        MG_LOG_DEBUG("memguard's {} collection on thread {}: {} objects, {} CUDA bytes freed, {:.3f} ms{}",
                     format::name_of(trigger), track::current_tid(), c.collected, c.cuda_bytes_freed,
                     c.duration_ns / 1e6, c.explain ? " (explained)" : "");
    }
    return r;
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
        collection_started(info);
    } else {
        collection_stopped(info);
    }
    return new_none();
}
PyMethodDef g_gc_callback_def{"memguard_gc_callback", gc_callback, METH_VARARGS, nullptr};

/// The generation a gc.collect() call asks for: 2 by default; false when the arguments are not
/// what gc.collect takes (the original call then raises its own error).
bool requested_generation(PyObject* args, PyObject* kwargs, int& generation) {
    const CApi* a = capi();
    generation = 2;
    const ptrdiff_t n = args ? a->PyTuple_Size(args) : 0;
    if (n > 1 || n < 0) return false;
    PyObject* g = n == 1 ? a->PyTuple_GetItem(args, 0) : nullptr;
    if (kwargs) {
        PyObject* k = a->PyDict_GetItemString(kwargs, "generation");  // borrowed
        if (!k || g) return false;                                    // other keywords, or the generation twice
        g = k;
    }
    if (!g) return true;
    const long v = a->PyLong_AsLong(g);
    if (v == -1 && a->PyErr_Occurred()) {
        a->PyErr_Clear();
        return false;
    }
    if (v < 0 || v > 2) return false;
    generation = static_cast<int>(v);
    return true;
}

/// Replaces gc.collect: the same call, marked as an explicit collection for the accounting; with
/// MEMGUARD_EXPLAIN_CYCLES=all, explained (its garbage saved, looked at, then freed).
PyObject* gc_collect_wrapper(PyObject* original, PyObject* args, PyObject* kwargs) {
    int generation = 2;
    if (t_trigger == Trigger::Automatic && !t_own_open && settings().cycles.explain == ExplainCycles::All &&
        g_explainer && recorder().gpu_seen() && !finalizing() && requested_generation(args, kwargs, generation)) {
        t_trigger = Trigger::Explicit;
        PyObject* r = run_owned(Trigger::Explicit, generation, nullptr, true, std::nullopt);
        t_trigger = Trigger::Automatic;
        return r;
    }
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

}  // namespace

bool start_gc_accounting(PyObject* gc) {
    const CApi* a = capi();
    g_budget = GcBudget(settings().cycles.gc_budget);
    g_budget.start(track::monotonic_ns());  // the wall time the budget is a fraction of: from here
    g_gc_collect = a->PyObject_GetAttrString(gc, "collect");
    Ref callbacks(a->PyObject_GetAttrString(gc, "callbacks"));
    Ref cb(make_function(&g_gc_callback_def, nullptr));
    Ref wrapper(g_gc_collect ? make_function(&g_gc_collect_def, g_gc_collect) : nullptr);
    if (!g_gc_collect || !callbacks || !cb || !wrapper) {
        a->PyErr_Clear();
        return false;
    }
    a->PyList_Append(callbacks.get(), cb.get());
    a->PyObject_SetAttrString(gc, "collect", wrapper.get());
    return true;
}

CollectResult collect_for(Trigger trigger, int generation, const CompileMark* mark) {
    if (!g_gc_collect || finalizing()) return CollectResult::Off;
    if (t_own_open) return CollectResult::Unsafe;  // inside one of memguard's collections already
    const GcBudget::Kind kind = budget_kind(trigger);
    if (!g_budget.allow(kind, track::monotonic_ns())) return CollectResult::Budget;
    const uint64_t skipped_total = g_budget.totals(kind).skipped;
    const uint64_t skipped = skipped_total - g_skipped_at_last[static_cast<size_t>(kind)];
    g_skipped_at_last[static_cast<size_t>(kind)] = skipped_total;
    const Trigger saved = t_trigger;
    t_trigger = trigger;
    // Explained only once CUDA memory is in use: before that no CUDA tensor can be in the garbage,
    // and a plain collection is one pass instead of two.
    const bool explain = settings().cycles.explain != ExplainCycles::Off && recorder().gpu_seen();
    Ref r(run_owned(trigger, generation, mark, explain, skipped));
    t_trigger = saved;
    if (!r) {  // memguard's collection never raises into the program
        capi()->PyErr_Clear();
        MG_LOG_DEBUG("memguard's {} collection raised; cleared", format::name_of(trigger));
    }
    return CollectResult::Collected;
}

void collect_compile_garbage(const CompileMark& mark) {
    // The compile trigger's safe point was decided by the caller (safe_point.h).
    collect_for(Trigger::Memguard, 2, &mark);
}

void set_explainer(PyObject* explained_collect) { g_explainer = explained_collect; }

void note_explanation(uint32_t id) {
    if (t_own_open) t_explain = id;
}

bool explaining_on_this_thread() { return t_own_open; }

}  // namespace memguard::python

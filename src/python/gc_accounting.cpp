#include "python/gc_accounting.h"

#include <cstring>

#include "common/log.h"
#include "format/vocabulary.h"
#include "python/allocator_mode.h"
#include "python/capi.h"
#include "python/compile_window.h"
#include "python/safe_point.h"
#include "python/state.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

// The collection trigger, as the report names it (format/vocabulary.h).
using Trigger = format::GcTrigger;

thread_local Trigger t_trigger = Trigger::Automatic;
thread_local const CompileMark* t_mark = nullptr;  // the mark memguard's collection on this thread is for

PyObject* g_gc_collect = nullptr;    // the original gc.collect (a strong reference, never released)
PyObject* g_memory_stats = nullptr;  // torch._C._cuda_memoryStats, once looked up
PyObject* g_get_device = nullptr;    // torch._C._cuda_getDevice

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
    if (!recorder().gpu_seen()) return -1;
    const CApi* a = capi();
    if (!g_memory_stats) {
        g_memory_stats = module_attr("torch._C", "_cuda_memoryStats");
        g_get_device = module_attr("torch._C", "_cuda_getDevice");
        if (!g_memory_stats || !g_get_device) {
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

void collection_started(PyObject* info) {
    set_collecting_on_this_thread(true);  // allocator mode: frees from here on are marked gc
    g_gc.t0 = track::monotonic_ns();
    if (t_trigger != Trigger::Memguard) close_forgotten_compile_window(g_gc.t0);
    g_gc.trigger = t_trigger;
    g_gc.generation = static_cast<int>(dict_int(info, "generation"));
    g_gc.cuda_before = cuda_allocated_bytes();
    recorder().watch_thread_frees(track::current_tid());
    g_gc.mark_age_ns = t_trigger == Trigger::Memguard && t_mark ? t_mark->age_ns(g_gc.t0) : -1;
}

void collection_stopped(PyObject* info) {
    set_collecting_on_this_thread(false);
    track::Recorder::Collection c;
    c.trigger = g_gc.trigger;
    c.generation = g_gc.generation;
    c.duration_ns = track::monotonic_ns() - g_gc.t0;
    c.collected = dict_int(info, "collected");
    c.uncollectable = dict_int(info, "uncollectable");
    int64_t after = g_gc.cuda_before >= 0 ? cuda_allocated_bytes() : -1;
    c.cuda_bytes_freed = after >= 0 ? g_gc.cuda_before - after : -1;
    // The GPU bytes memguard's hooks saw freed on this thread during the collection: memory freed
    // outside PyTorch's allocator (cudaFree by another library; a program without torch), which
    // PyTorch's counter does not see. Only this thread's frees: the collection and the finalizers
    // it runs are on this thread (it holds the GIL), while a free on another thread in the window
    // is that thread's own doing. The larger figure is kept, never the sum: a finalizer that
    // empties PyTorch's cache would count its bytes twice.
    const uint64_t seen = recorder().watched_thread_freed();
    recorder().watch_thread_frees(0);
    if (seen > 0 && static_cast<int64_t>(seen) > c.cuda_bytes_freed) c.cuda_bytes_freed = static_cast<int64_t>(seen);
    c.mark_age_ns = g_gc.mark_age_ns;
    if (g_gc.trigger == Trigger::Memguard && t_mark) c.compile_ids = t_mark->compile_ids();
    recorder().record_collection(c);
    if (g_gc.trigger == Trigger::Memguard) {
        MG_LOG_DEBUG("collected compile garbage of {} on thread {}: {} objects, {} CUDA bytes freed, {:.3f} ms, "
                     "{:.3f} s after the compile",
                     c.compile_ids, track::current_tid(), c.collected, c.cuda_bytes_freed, c.duration_ns / 1e6,
                     c.mark_age_ns / 1e9);
    }
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

}  // namespace

bool start_gc_accounting(PyObject* gc) {
    const CApi* a = capi();
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

void collect_compile_garbage(const CompileMark& mark) {
    const CApi* a = capi();
    t_trigger = Trigger::Memguard;
    t_mark = &mark;
    Ref r(a->PyObject_CallObject(g_gc_collect, nullptr));
    if (!r) a->PyErr_Clear();
    t_trigger = Trigger::Automatic;
    t_mark = nullptr;
}

}  // namespace memguard::python

#include "allocmode/torch_bridge.h"

#include <cstring>

#include "allocmode/api.h"
#include "allocmode/torch_memory_api.h"
#include "allocmode/torch_snapshot.h"
#include "allocmode/tracking_allocator.h"
#include "common/log.h"
#include "python/allocator_mode.h"
#include "python/capi.h"
#include "python/insight.h"
#include "python/state.h"

namespace memguard::allocmode {

namespace {

using namespace python;  // the C API resolved at run time (capi.h) and its helpers (state.h)

/// What PyTorch is handed: the addresses of libmemguard.so's exported functions (api.h) and the
/// statistics functions its replaced entry points answer from.
struct AllocatorBridge {
    uintptr_t alloc = 0, free = 0;
    uintptr_t init = 0, reset = 0, memory_fraction = 0, record_stream = 0;
    uintptr_t begin_pool = 0, end_pool = 0, release_pool = 0;
    std::vector<std::pair<std::string, int64_t>> (*stats)(int device) = nullptr;
    bool (*reset_peak)(int device) = nullptr;
    bool (*reset_accumulated)(int device) = nullptr;
};

AllocatorBridge g_bridge;
track::Recorder* g_recorder = nullptr;  // set before the switch is armed
thread_local bool t_in_rescue = false;

// Strong references kept for the life of the process (GIL-protected).
PyObject* g_allocator = nullptr;   // the torch._C._CUDAPluggableAllocator we installed
PyObject* g_gc_collect = nullptr;  // gc.collect as the program sees it (memguard's accounting wrapper)

PyObject* new_none() {
    capi()->Py_IncRef(capi()->none);
    return capi()->none;
}

PyObject* get_module(const char* name) {
    const CApi* a = capi();
    Ref n(a->PyUnicode_FromString(name));
    return n ? a->PyImport_GetModule(n.get()) : nullptr;
}

/// The message of the pending exception (cleared).
std::string take_error() {
    const CApi* a = capi();
    PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
    a->PyErr_Fetch(&type, &value, &tb);
    std::string text = "?";
    if (value) {
        Ref s(a->PyObject_Str(value));
        const char* c = s ? a->PyUnicode_AsUTF8(s.get()) : nullptr;
        if (c) text = c;
    }
    a->PyErr_Clear();
    for (PyObject* p : {type, value, tb}) {
        if (p) a->Py_DecRef(p);
    }
    return text;
}

/// A module whose import finished (importlib sets __spec__._initializing while it runs).
bool fully_loaded(PyObject* module) {
    const CApi* a = capi();
    Ref spec(a->PyObject_GetAttrString(module, "__spec__"));
    if (!spec) {
        a->PyErr_Clear();
        return true;
    }
    Ref init(a->PyObject_GetAttrString(spec.get(), "_initializing"));
    if (!init) {
        a->PyErr_Clear();
        return true;
    }
    return a->PyObject_IsTrue(init.get()) == 0;
}

// --- statistics ----------------------------------------------------------------------------------

int device_arg(PyObject* args) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) < 1) return -1;
    long d = a->PyLong_AsLong(a->PyTuple_GetItem(args, 0));
    if (d == -1 && a->PyErr_Occurred()) {
        a->PyErr_Clear();
        return -1;
    }
    return static_cast<int>(d);
}

/// The original torch._C function for a device memguard does not know, so that PyTorch's own
/// error reaches the program. `self` holds it.
PyObject* call_original(PyObject* self, PyObject* args) { return capi()->PyObject_CallObject(self, args); }

/// torch._C._cuda_memoryStats(device): the nested dict PyTorch returns
/// ({"allocated_bytes": {"all": {"current": ...}}, "num_ooms": ..., ...}).
PyObject* memory_stats(PyObject* self, PyObject* args) {
    const CApi* a = capi();
    int device = device_arg(args);
    auto items = device >= 0 && g_bridge.stats ? g_bridge.stats(device) : decltype(g_bridge.stats(0)){};
    if (items.empty()) return call_original(self, args);
    Ref result(a->PyDict_New());
    if (!result) return nullptr;
    for (const auto& [key, value] : items) {
        PyObject* dict = result.get();
        size_t start = 0;
        bool ok = true;
        for (;;) {
            size_t dot = key.find('.', start);
            std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
            if (dot == std::string::npos) {
                Ref v(a->PyLong_FromLongLong(value));
                ok = v && a->PyDict_SetItemString(dict, part.c_str(), v.get()) == 0;
                break;
            }
            PyObject* child = a->PyDict_GetItemString(dict, part.c_str());  // borrowed
            if (!child) {
                Ref fresh(a->PyDict_New());
                if (!fresh || a->PyDict_SetItemString(dict, part.c_str(), fresh.get()) != 0) {
                    ok = false;
                    break;
                }
                child = fresh.get();  // the dict holds it now
            }
            dict = child;
            start = dot + 1;
        }
        if (!ok) return nullptr;
    }
    return result.release();
}
PyMethodDef g_memory_stats_def{"_cuda_memoryStats", memory_stats, METH_VARARGS,
                               "memguard (MEMGUARD_ALLOCATOR=memguard): the allocator statistics of a device"};

/// torch._C._accelerator_isAllocatorInitialized() (2.9 and later): torch.accelerator's statistics
/// answer only when it is true, and PyTorch asks the allocator it registered for CUDA (its own
/// caching allocator, never initialized once memguard's is PyTorch's). True once memguard's
/// allocator exists, else PyTorch's answer.
PyObject* allocator_initialized(PyObject* self, PyObject* args) {
    if (existing_allocator() == nullptr) return call_original(self, args);
    return capi()->PyBool_FromLong(1);
}
PyMethodDef g_allocator_initialized_def{"_accelerator_isAllocatorInitialized", allocator_initialized, METH_VARARGS,
                                        "memguard (MEMGUARD_ALLOCATOR=memguard): whether the CUDA allocator is "
                                        "initialized"};

PyObject* reset_peak(PyObject* self, PyObject* args) {
    int device = device_arg(args);
    if (device < 0 || !g_bridge.reset_peak || !g_bridge.reset_peak(device)) return call_original(self, args);
    return new_none();
}
PyMethodDef g_reset_peak_def{"_cuda_resetPeakMemoryStats", reset_peak, METH_VARARGS,
                             "memguard (MEMGUARD_ALLOCATOR=memguard): resets the peak statistics of a device"};

PyObject* reset_accumulated(PyObject* self, PyObject* args) {
    int device = device_arg(args);
    if (device < 0 || !g_bridge.reset_accumulated || !g_bridge.reset_accumulated(device))
        return call_original(self, args);
    return new_none();
}
PyMethodDef
    g_reset_accumulated_def{"_cuda_resetAccumulatedMemoryStats", reset_accumulated, METH_VARARGS,
                            "memguard (MEMGUARD_ALLOCATOR=memguard): resets the accumulated statistics of a device"};

// --- what a pluggable allocator cannot do ---------------------------------------------------------

enum Limit { kGraphTrees, kNumLimits };
const char* const kLimitText[kNumLimits] = {
    "CUDA graph trees (torch.compile mode=\"reduce-overhead\") need to checkpoint PyTorch's own allocator "
    "pools, which a pluggable allocator cannot do: they fail with MEMGUARD_ALLOCATOR=memguard. Use "
    "MEMGUARD_ALLOCATOR=native for them (plain torch.cuda.graph capture works in both modes)",
};
bool g_warned[kNumLimits] = {};

/// Wraps a torch._C function that fails for a pluggable allocator: one warning naming the limit,
/// then the original call (which raises PyTorch's error). `self` is (original, limit).
PyObject* limited_call(PyObject* self, PyObject* args, PyObject* kwargs) {
    const CApi* a = capi();
    PyObject* original = a->PyTuple_GetItem(self, 0);
    long limit = a->PyLong_AsLong(a->PyTuple_GetItem(self, 1));
    if (limit >= 0 && limit < kNumLimits && !g_warned[limit]) {
        g_warned[limit] = true;
        MG_LOG_WARN("{}", kLimitText[limit]);
    }
    return a->PyObject_Call(original, args, kwargs);
}
PyMethodDef g_limited_def{"memguard_limited", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(limited_call)),
                          METH_VARARGS | METH_KEYWORDS,
                          "A PyTorch function that a pluggable allocator does not support (wrapped by memguard)"};

void replace(PyObject* torch_c, const char* name, PyMethodDef* def, PyObject* self) {
    const CApi* a = capi();
    Ref fn(a->PyCFunction_NewEx(def, self, nullptr));
    if (!fn || a->PyObject_SetAttrString(torch_c, name, fn.get()) != 0) {
        MG_LOG_WARN("allocator mode: cannot replace torch._C.{}: {}", name, take_error());
    }
}

void patch_torch(PyObject* torch_c) {
    const CApi* a = capi();
    struct Stat {
        const char* name;
        PyMethodDef* def;
    };
    // torch.cuda's entry points, and torch.accelerator's (2.9 and later) that reach the same
    // statistics of the current accelerator.
    for (const Stat& s :
         {Stat{"_cuda_memoryStats", &g_memory_stats_def}, Stat{"_cuda_resetPeakMemoryStats", &g_reset_peak_def},
          Stat{"_cuda_resetAccumulatedMemoryStats", &g_reset_accumulated_def},
          Stat{"_accelerator_getDeviceStats", &g_memory_stats_def},
          Stat{"_accelerator_resetPeakStats", &g_reset_peak_def},
          Stat{"_accelerator_resetAccumulatedStats", &g_reset_accumulated_def},
          Stat{"_accelerator_isAllocatorInitialized", &g_allocator_initialized_def}}) {
        Ref original(a->PyObject_GetAttrString(torch_c, s.name));
        if (!original) {
            a->PyErr_Clear();
            continue;
        }
        replace(torch_c, s.name, s.def, original.get());
    }
    struct Limited {
        const char* name;
        Limit limit;
    };
    for (const Limited& l :
         {Limited{"_cuda_getCheckpointState", kGraphTrees}, Limited{"_cuda_setCheckpointPoolState", kGraphTrees},
          Limited{"_cuda_checkPoolLiveAllocations", kGraphTrees}}) {
        Ref original(a->PyObject_GetAttrString(torch_c, l.name));
        Ref pair(original ? a->PyTuple_New(2) : nullptr);
        Ref index(pair ? a->PyLong_FromLongLong(l.limit) : nullptr);
        if (!index) {
            a->PyErr_Clear();
            continue;
        }
        a->PyTuple_SetItem(pair.get(), 0, original.release());  // steals
        a->PyTuple_SetItem(pair.get(), 1, index.release());
        replace(torch_c, l.name, &g_limited_def, pair.get());
    }
}

/// allocator.<setter>(address); false (error cleared) when it fails or does not exist.
bool set_hook(PyObject* allocator, const char* setter, uintptr_t address) {
    const CApi* a = capi();
    Ref fn(a->PyObject_GetAttrString(allocator, setter));
    Ref args(fn ? a->PyTuple_New(1) : nullptr);
    Ref value(args ? a->PyLong_FromUnsignedLongLong(address) : nullptr);
    if (!value) {
        a->PyErr_Clear();
        return false;
    }
    a->PyTuple_SetItem(args.get(), 0, value.release());
    Ref r(a->PyObject_CallObject(fn.get(), args.get()));
    if (!r) {
        a->PyErr_Clear();
        return false;
    }
    return true;
}

void install(PyObject* torch_c) {
    const CApi* a = capi();
    Ref custom(a->PyObject_GetAttrString(torch_c, "_cuda_customAllocator"));
    Ref change(custom ? a->PyObject_GetAttrString(torch_c, "_cuda_changeCurrentAllocator") : nullptr);
    if (!change) {
        a->PyErr_Clear();
        MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: this PyTorch has no CUDA support (no pluggable allocator "
                    "interface); nothing to switch, memguard only records");
        return;
    }
    Ref args(a->PyTuple_New(2));
    Ref alloc(a->PyLong_FromUnsignedLongLong(g_bridge.alloc));
    Ref free(a->PyLong_FromUnsignedLongLong(g_bridge.free));
    if (!args || !alloc || !free) {
        MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: {}; PyTorch's allocator stays", take_error());
        return;
    }
    a->PyTuple_SetItem(args.get(), 0, alloc.release());
    a->PyTuple_SetItem(args.get(), 1, free.release());
    Ref allocator(a->PyObject_CallObject(custom.get(), args.get()));
    if (!allocator) {
        MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: torch._C._cuda_customAllocator failed ({}); PyTorch's "
                    "allocator stays",
                    take_error());
        return;
    }
    struct Hook {
        const char* setter;
        uintptr_t address;
    };
    const Hook hooks[] = {
        {"set_init_fn", g_bridge.init},
        {"set_reset_fn", g_bridge.reset},
        {"set_memory_fraction_fn", g_bridge.memory_fraction},
        {"set_record_stream_fn", g_bridge.record_stream},
        {"set_begin_allocate_to_pool", g_bridge.begin_pool},
        {"set_end_allocate_to_pool_fn", g_bridge.end_pool},
        {"set_release_pool", g_bridge.release_pool},
    };
    for (const Hook& h : hooks) {
        if (!set_hook(allocator.get(), h.setter, h.address)) {
            // Without every hook (an old PyTorch) graphs, empty_cache or record_stream would
            // silently misbehave: better no switch at all.
            MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: this PyTorch's pluggable allocator has no {}; PyTorch's "
                        "allocator stays",
                        h.setter);
            return;
        }
    }
    Ref cargs(a->PyTuple_New(1));
    if (!cargs) {
        a->PyErr_Clear();
        return;
    }
    a->Py_IncRef(allocator.get());
    a->PyTuple_SetItem(cargs.get(), 0, allocator.get());
    Ref r(a->PyObject_CallObject(change.get(), cargs.get()));
    if (!r) {
        std::string why = take_error();
        MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: PyTorch's CUDA allocator is already initialized ({}); memguard "
                    "stays in interposition mode",
                    why);
        return;
    }
    g_allocator = allocator.release();
    patch_torch(torch_c);
    patch_memory_api(torch_c);                         // torch_memory_api.h
    install_snapshot_functions(torch_c, *g_recorder);  // snapshots and memory history (torch_snapshot.h)
    static const track::Recorder::TensorCounters kTensorCounters{&tensor_counters, &reset_tensor_peak};
    g_recorder->set_tensor_counters(&kTensorCounters);
    g_recorder->set_allocator_mode();
    MG_LOG_INFO("memguard is PyTorch's CUDA allocator (MEMGUARD_ALLOCATOR=memguard)");
}

/// The switch's readiness (python/allocator_mode.h): torch.cuda.memory has finished loading.
bool torch_ready() {
    const CApi* a = capi();
    Ref memory(get_module("torch.cuda.memory"));
    if (!memory) {
        a->PyErr_Clear();
        Ref torch(get_module("torch"));
        a->PyErr_Clear();
        // torch imported without torch.cuda.memory is a PyTorch without CUDA support built
        // differently; decide once torch itself has finished loading.
        if (!torch || !fully_loaded(torch.get())) return false;
    } else if (!fully_loaded(memory.get())) {
        return false;
    }
    return true;
}

/// The switch itself, once (python/allocator_mode.h).
void switch_to_memguard() {
    const CApi* a = capi();
    Ref torch_c(get_module("torch._C"));
    if (!torch_c) {
        a->PyErr_Clear();
        MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: torch._C is not loaded; PyTorch's allocator stays");
        return;
    }
    if (!a->PyDict_New || !a->PyDict_SetItemString || !a->PyLong_FromUnsignedLongLong || !a->PyLong_FromLongLong) {
        MG_LOG_WARN("MEMGUARD_ALLOCATOR=memguard: this Python lacks functions memguard needs; PyTorch's allocator "
                    "stays");
        return;
    }
    install(torch_c.get());
}

template <typename Fn>
uintptr_t address(Fn* fn) {
    return reinterpret_cast<uintptr_t>(fn);
}

}  // namespace

std::string python_error_text() { return take_error(); }

int python_device_arg(PyObject* args) { return device_arg(args); }

void arm_torch_switch(track::Recorder& rec) {
    g_recorder = &rec;
    AllocatorBridge& b = g_bridge;
    b.alloc = address(&memguard_alloc);
    b.free = address(&memguard_free);
    b.init = address(&memguard_allocator_init);
    b.reset = address(&memguard_allocator_empty_cache);
    b.memory_fraction = address(&memguard_allocator_memory_fraction);
    b.record_stream = address(&memguard_allocator_record_stream);
    b.begin_pool = address(&memguard_allocator_begin_pool);
    b.end_pool = address(&memguard_allocator_end_pool);
    b.release_pool = address(&memguard_allocator_release_pool);
    b.stats = &stats_of;
    b.reset_peak = &reset_peak_of;
    b.reset_accumulated = &reset_accumulated_of;
    python::set_allocator_switch({&torch_ready, &switch_to_memguard});
}

namespace {

/// Runs fn() with the GIL when this thread holds it or may take it (it has a Python thread state:
/// it ran Python; the allocator holds no lock here, so taking the GIL cannot deadlock against a
/// thread that holds it and allocates) and the interpreter runs. False when fn did not run.
/// `any_thread`: also on a thread that never ran Python (PyGILState_Ensure gives it a thread
/// state), as PyTorch calls its OOM observers from any allocating thread.
template <class Fn>
bool with_gil(Fn&& fn, bool any_thread = false) {
    const CApi* a = capi();
    if (t_in_rescue || !interpreter_running() || !a->PyGILState_Check) return false;
    const bool held = a->PyGILState_Check() != 0;
    int state = 0;
    if (!held) {
        // PyTorch's operators release the GIL, so the allocating thread rarely holds it.
        if (!a->PyGILState_GetThisThreadState || !a->PyGILState_Ensure || !a->PyGILState_Release ||
            (!any_thread && !a->PyGILState_GetThisThreadState()))
            return false;
        state = a->PyGILState_Ensure();
    }
    bool ran = false;
    if (interpreter_running() && !a->Py_IsFinalizing()) {
        t_in_rescue = true;
        ErrorGuard keep_error;
        ran = fn();
        t_in_rescue = false;
    }
    if (!held) a->PyGILState_Release(state);
    return ran;
}

}  // namespace

bool oom_rescue_collect(bool capture_underway) {
    if (capture_underway) return false;
    return with_gil([] {
        const CApi* a = capi();
        if (!g_gc_collect) {
            Ref gc(a->PyImport_ImportModule("gc"));
            g_gc_collect = gc ? a->PyObject_GetAttrString(gc.get(), "collect") : nullptr;
        }
        if (!g_gc_collect) return false;
        Ref r(a->PyObject_CallObject(g_gc_collect, nullptr));
        return static_cast<bool>(r);
    });
}

void explain_allocator_oom(track::Recorder& rec, const alloc::OomReport& r, uint32_t stack_id,
                           uint32_t python_stack_id) {
    python::AllocatorOomFigures f;
    f.device = r.device;
    f.requested = r.requested;
    f.rounded = r.rounded;
    f.limit = r.limit_bytes ? r.limit_bytes : r.device_total;
    f.allocated = r.allocated_bytes;
    f.reserved = r.reserved_bytes;
    f.device_free = r.capture_underway ? 0 : r.device_free;
    f.device_total = r.device_total;
    f.stack_id = stack_id;
    f.python_stack_id = python_stack_id;
    // The moment's tags need Python (the GIL); never during a capture, where the torch side's
    // calls could reach CUDA.
    const bool capturing = r.capture_underway || rec.captures().active() > 0;
    if (!capturing && with_gil([&f] { return python::allocator_oom_moment(f); })) return;
    format::rec::OomContext x;
    x.device = r.device;
    x.source = format::OomSource::Allocator;
    x.requested = r.requested;
    x.rounded = r.rounded;
    if (f.limit) x.limit = f.limit;
    if (!r.capture_underway) x.device_free = r.device_free;
    if (r.device_total) x.device_total = r.device_total;
    x.allocated = r.allocated_bytes;
    x.reserved = r.reserved_bytes;
    x.stack_id = stack_id;
    x.python_stack_id = python_stack_id;
    x.capturing = capturing;
    rec.record_oom_context(x);
    python::oom_notice(rec, r.device);
}

void notify_oom_observers(const alloc::OomReport& r) {
    if (!has_oom_observers()) return;
    // PyTorch's arguments: the device allocation that failed, the memory fraction's limit or else
    // the device's total, the device's free bytes (0 when a capture kept them from being asked).
    const size_t alloc_size = r.segment_size ? r.segment_size : r.rounded;
    const size_t limit = r.limit_bytes ? r.limit_bytes : r.device_total;
    with_gil(
        [&] {
            call_oom_observers(r.device, alloc_size, limit, r.device_free);
            return true;
        },
        /*any_thread=*/true);
}

}  // namespace memguard::allocmode

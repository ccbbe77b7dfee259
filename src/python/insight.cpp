// The insight natives (python/insight.h): thin calls into the Recorder's minor-8 methods
// (track/records_insight.cpp), and the installation of the torch side (memguard_torch.py).
#include "python/insight.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "common/log.h"
#include "format/vocabulary.h"
#include "python/args.h"
#include "python/capi.h"
#include "python/compile_marks.h"
#include "python/cycles.h"
#include "python/embedded_memguard_torch_py.h"
#include "python/module.h"
#include "python/state.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

// The steps this process completed (s records written), shared by the optimizer hooks and
// memguard.step(). GIL-protected; atomic because a fork child reads it without the GIL's history.
std::atomic<uint32_t> g_steps{0};
PyObject* g_torch_ns = nullptr;  // the torch side's namespace, once installed (a strong reference)
bool g_torch_tried = false;      // its installation ran (successfully or not): never again
bool g_wants_imports = false;    // the torch side asked for import events (_want_imports)
std::atomic<bool> g_oom_line_printed{false};

std::optional<uint64_t> known(long long v) {
    return v < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(v));
}

/// _step(source, name) -> the step's number (1, 2, ...): writes s. source: 0 optimizer, 1 api.
PyObject* native_step(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (!has_size(args, 2)) return nullptr;
    long long source = 0;
    if (!item_ll(args, 0, source)) return nullptr;
    const char* name = a->PyUnicode_AsUTF8(a->PyTuple_GetItem(args, 1));
    if (!name) return nullptr;
    uint32_t index = g_steps.fetch_add(1, std::memory_order_relaxed) + 1;
    recorder().record_step(index, source == 1 ? format::StepSource::Api : format::StepSource::Optimizer, name);
    return new_long(index);
}

PyObject* native_steps(PyObject*, PyObject*) { return new_long(g_steps.load(std::memory_order_relaxed)); }

/// _moment_begin(reason) -> its id, 0 when nothing was written. reason: 0 step, 1 oom, 2 api.
PyObject* native_moment_begin(PyObject*, PyObject* args) {
    long long reason = 0;
    if (!ll_args(args, &reason, 1)) return nullptr;
    auto r = reason == 1   ? format::MomentReason::Oom
             : reason == 2 ? format::MomentReason::Api
                           : format::MomentReason::Step;
    return new_long(recorder().record_moment_begin(r, g_steps.load(std::memory_order_relaxed)));
}

/// _tag(moment, tags) -> g records written; tags: a tuple of (device, addr, size, category, label
/// or None). One call per moment, not one per tensor.
PyObject* native_tag(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (!has_size(args, 2)) return nullptr;
    long long moment = 0;
    if (!item_ll(args, 0, moment)) return nullptr;
    PyObject* tags = a->PyTuple_GetItem(args, 1);
    ptrdiff_t n = a->PyTuple_Size(tags);
    if (n < 0) return nullptr;
    long long written = 0;
    for (ptrdiff_t i = 0; i < n && moment > 0; ++i) {
        PyObject* t = a->PyTuple_GetItem(tags, i);
        long long v[4];
        if (!t || !has_size(t, 5)) return nullptr;
        for (int k = 0; k < 4; ++k) {
            if (!item_ll(t, k, v[k], 0)) return nullptr;
        }
        if (v[3] < 0 || !format::is_tensor_category(static_cast<format::Category>(v[3])) || v[0] < -1 ||
            v[0] > format::kMaxDevice) {
            continue;
        }
        format::rec::TensorTag g;
        g.moment = static_cast<uint32_t>(moment);
        g.device = static_cast<int>(v[0]);
        g.addr = static_cast<uint64_t>(v[1]);
        g.size = static_cast<uint64_t>(v[2]);
        g.category = static_cast<format::Category>(v[3]);
        PyObject* label = a->PyTuple_GetItem(t, 4);
        if (label != a->none) {
            const char* s = a->PyUnicode_AsUTF8(label);
            if (!s) return nullptr;
            g.label = s;
        }
        recorder().record_tensor_tag(g);
        ++written;
    }
    return new_long(written);
}

/// _blocks(moment, blocks) -> d records written; blocks: a tuple of (device, addr, size,
/// requested, state, segment, pool), state 0 allocated, 1 pending free, 2 inactive; pool a str.
PyObject* native_blocks(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (!has_size(args, 2)) return nullptr;
    long long moment = 0;
    if (!item_ll(args, 0, moment)) return nullptr;
    PyObject* blocks = a->PyTuple_GetItem(args, 1);
    ptrdiff_t n = a->PyTuple_Size(blocks);
    if (n < 0) return nullptr;
    long long written = 0;
    for (ptrdiff_t i = 0; i < n && moment > 0; ++i) {
        PyObject* b = a->PyTuple_GetItem(blocks, i);
        long long v[6];
        if (!b || !has_size(b, 7)) return nullptr;
        for (int k = 0; k < 6; ++k) {
            if (!item_ll(b, k, v[k], 0)) return nullptr;
        }
        const char* pool = a->PyUnicode_AsUTF8(a->PyTuple_GetItem(b, 6));
        if (!pool) return nullptr;
        if (v[4] < 0 || v[4] > 2 || v[0] < 0 || v[0] > format::kMaxDevice) continue;
        format::rec::AllocatorBlock d;
        d.moment = static_cast<uint32_t>(moment);
        d.device = static_cast<int>(v[0]);
        d.addr = static_cast<uint64_t>(v[1]);
        d.size = static_cast<uint64_t>(v[2]);
        d.requested = static_cast<uint64_t>(v[3]);
        d.state = static_cast<format::BlockState>(v[4]);
        d.segment = static_cast<uint64_t>(v[5]);
        d.pool = pool;
        recorder().record_allocator_block(d);
        ++written;
    }
    return new_long(written);
}

/// _moment_end(moment, tensors, blocks, complete).
PyObject* native_moment_end(PyObject*, PyObject* args) {
    long long v[4];
    if (!ll_args(args, v, 4)) return nullptr;
    if (v[0] > 0) {
        recorder().record_moment_end(static_cast<uint32_t>(v[0]), static_cast<uint64_t>(v[1] < 0 ? 0 : v[1]),
                                     static_cast<uint64_t>(v[2] < 0 ? 0 : v[2]), v[3] > 0);
    }
    return new_none();
}

/// _oom_context(device, source, requested, rounded, limit, device_free, device_total, allocated,
/// reserved, moment, stack_id, python_stack_id): writes x. None or -1: not known. The stacks, when
/// -1, are the calling thread's (the request's: PyTorch calls its OOM observer on the allocating
/// thread). source: 0 torch, 1 cuda, 2 allocator.
PyObject* native_oom_context(PyObject*, PyObject* args) {
    long long v[12];
    if (!ll_args(args, v, 12)) return nullptr;
    track::Recorder& rec = recorder();
    if (!rec.active()) return new_none();
    format::rec::OomContext x;
    x.device = v[0] < 0 || v[0] > format::kMaxDevice ? 0 : static_cast<int>(v[0]);
    x.source = v[1] == 1   ? format::OomSource::Cuda
               : v[1] == 2 ? format::OomSource::Allocator
                           : format::OomSource::Torch;
    x.requested = known(v[2]);
    x.rounded = v[3] < 0 ? 0 : static_cast<uint64_t>(v[3]);
    x.limit = known(v[4]);
    x.device_free = known(v[5]);
    x.device_total = known(v[6]);
    x.allocated = known(v[7]);
    x.reserved = known(v[8]);
    x.moment = v[9] < 0 ? 0 : static_cast<uint32_t>(v[9]);
    if (v[10] >= 0) {
        x.stack_id = static_cast<uint32_t>(v[10]);
        x.python_stack_id = static_cast<uint32_t>(v[11] < 0 ? 0 : v[11]);
    } else {
        uintptr_t ips[track::Recorder::kStackCapacity];
        int n = rec.capture_stack(ips);
        x.stack_id = rec.intern_stack(ips, n);
        x.python_stack_id = rec.python_stack_id();
    }
    x.compile_pending = compile_mark_pending();
    x.capturing = rec.captures().active() > 0;
    rec.record_oom_context(x);
    return new_none();
}

/// _oom_notice(device) -> True when it printed: flushes the report and prints the one stderr line
/// (once per process: a retrying program would otherwise print one per attempt).
PyObject* native_oom_notice(PyObject*, PyObject* args) {
    long long device = 0;
    if (!ll_args(args, &device, 1)) return nullptr;
    return new_long(oom_notice(recorder(), static_cast<int>(device)) ? 1 : 0);
}

/// _log(message): one warning through memguard's logger.
PyObject* native_log(PyObject*, PyObject* args) {
    const CApi* a = capi();
    const char* msg = a->PyTuple_Size(args) == 1 ? a->PyUnicode_AsUTF8(a->PyTuple_GetItem(args, 0)) : nullptr;
    if (!msg) return nullptr;
    MG_LOG_WARN("{}", msg);
    return new_none();
}

/// _torch() -> the torch side's namespace, or None before torch's optimizer module loaded.
PyObject* native_torch(PyObject*, PyObject*) {
    if (!g_torch_ns) return new_none();
    capi()->Py_IncRef(g_torch_ns);
    return g_torch_ns;
}

/// _want_imports(flag): whether the torch side's on_import() runs on import events.
PyObject* native_want_imports(PyObject*, PyObject* args) {
    long long flag = 0;
    if (!ll_args(args, &flag, 1)) return nullptr;
    g_wants_imports = flag != 0;
    return new_none();
}

/// _allocator_mode() -> True when memguard is PyTorch's allocator (MEMGUARD_ALLOCATOR=memguard).
PyObject* native_allocator_mode(PyObject*, PyObject*) { return new_long(recorder().stats(-1).tensors ? 1 : 0); }

PyMethodDef g_insight_natives[] = {
    {"_step", native_step, METH_VARARGS, nullptr},
    {"_steps", native_steps, METH_NOARGS, nullptr},
    {"_moment_begin", native_moment_begin, METH_VARARGS, nullptr},
    {"_tag", native_tag, METH_VARARGS, nullptr},
    {"_blocks", native_blocks, METH_VARARGS, nullptr},
    {"_moment_end", native_moment_end, METH_VARARGS, nullptr},
    {"_oom_context", native_oom_context, METH_VARARGS, nullptr},
    {"_oom_notice", native_oom_notice, METH_VARARGS, nullptr},
    {"_log", native_log, METH_VARARGS, nullptr},
    {"_torch", native_torch, METH_NOARGS, nullptr},
    {"_want_imports", native_want_imports, METH_VARARGS, nullptr},
    {"_allocator_mode", native_allocator_mode, METH_NOARGS, nullptr},
};

/// Calls ns.<name>() and drops its result; errors are cleared (the torch side logs its own).
void call_ns(const char* name) {
    const CApi* a = capi();
    Ref fn(a->PyObject_GetAttrString(g_torch_ns, name));
    Ref r(fn ? a->PyObject_CallObject(fn.get(), nullptr) : nullptr);
    if (!r) a->PyErr_Clear();
}

}  // namespace

bool oom_notice(track::Recorder& rec, int device) {
    std::string path = rec.report_path();
    if (path.empty()) return false;
    rec.flush();
    if (g_oom_line_printed.exchange(true)) return false;
    std::string line = "memguard: CUDA out of memory on device " + std::to_string(device) + ": memguard oom " + path +
                       "\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    return true;
}

bool allocator_oom_moment(const AllocatorOomFigures& f) {
    const CApi* a = capi();
    if (!g_torch_ns || !interpreter_running() || a->Py_IsFinalizing()) return false;
    ErrorGuard keep_error;
    Ref fn(a->PyObject_GetAttrString(g_torch_ns, "allocator_oom"));
    Ref args(a->PyTuple_New(10));
    if (!fn || !args) return false;
    auto or_unknown = [](uint64_t v) { return v ? static_cast<long long>(v) : -1LL; };
    const long long v[10] = {f.device,
                             static_cast<long long>(f.requested),
                             static_cast<long long>(f.rounded),
                             or_unknown(f.limit),
                             or_unknown(f.device_free),
                             or_unknown(f.device_total),
                             static_cast<long long>(f.allocated),
                             static_cast<long long>(f.reserved),
                             f.stack_id,
                             f.python_stack_id};
    for (int i = 0; i < 10; ++i) {
        PyObject* o = new_long(v[i]);
        if (!o) return false;
        a->PyTuple_SetItem(args.get(), i, o);
    }
    Ref r(a->PyObject_CallObject(fn.get(), args.get()));
    return r && a->PyObject_IsTrue(r.get()) == 1;
}

bool add_insight_natives(PyObject* mod) {
    return add_methods(mod, g_insight_natives, sizeof g_insight_natives / sizeof g_insight_natives[0]);
}

bool torch_side_wants_imports() { return !g_torch_tried || g_wants_imports; }

void on_import_for_torch_side() {
    const CApi* a = capi();
    if (g_torch_ns) {
        if (g_wants_imports) call_ns("on_import");
        return;
    }
    if (g_torch_tried) return;  // the installation itself imports
    // torch.optim.optimizer defines the registration functions before its Optimizer class; the
    // first import event after that (the module's own imports, or any later one) installs.
    Ref reg(module_attr("torch.optim.optimizer", "register_optimizer_step_post_hook"));
    if (!reg) {
        a->PyErr_Clear();
        return;
    }
    g_torch_tried = true;
    if (!a->PyLong_FromLongLong) return;
    Ref ns(new_module("memguard._torch"));
    // The switches (MEMGUARD_STEPS, MEMGUARD_EXPLAIN_OOM) as the namespace's STEPS and EXPLAIN_OOM,
    // read by install() and the OOM paths.
    auto set_switch = [&](const char* name, bool on) {
        Ref v(a->PyLong_FromLongLong(on ? 1 : 0));
        return v && a->PyObject_SetAttrString(ns.get(), name, v.get()) == 0;
    };
    if (!ns || !add_natives(ns.get()) || !set_switch("STEPS", settings().steps) ||
        !set_switch("EXPLAIN_OOM", settings().explain_oom) || !run_source(ns.get(), embedded::kMemguardTorchPy) ||
        !install_cycles(ns.get())) {
        a->PyErr_Clear();
        MG_LOG_WARN("cannot set up memguard's torch side; steps and out-of-memory context are not recorded");
        return;
    }
    g_torch_ns = ns.release();
    call_ns("install");
    MG_LOG_DEBUG("memguard's torch side is installed (optimizer step hooks)");
}

}  // namespace memguard::python

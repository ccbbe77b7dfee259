// The cycles natives (python/cycles.h): memguard's collections asked for from Python, the
// re-tracking of an explained collection's saved garbage, and the explanation records.
#include "python/cycles.h"

#include <string>

#include "common/log.h"
#include "format/records.h"
#include "python/args.h"
#include "python/capi.h"
#include "python/compile_marks.h"
#include "python/embedded_memguard_cycles_py.h"
#include "python/embedded_memguard_explain_py.h"
#include "python/gc_accounting.h"
#include "python/module.h"
#include "python/state.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

using format::GcTrigger;

/// Why a collection may not run now, from what the rules of the compile trigger also check: a
/// stream capture anywhere in the process (a collection's frees would reach the graph's pool), a
/// dynamo compile on this thread or a torch.compile region (collecting inside them is unsafe or
/// useless), another collection of memguard's on this thread (the explanation's own code).
bool unsafe_moment() { return recorder().captures().active() > 0 || explaining_on_this_thread() || dynamo_busy(); }

/// _collect(trigger, generation) -> 0 collected, 1 skipped by the budget, 2 not a safe moment, 3 off.
/// trigger: "recompute" or "step".
PyObject* native_collect(PyObject*, PyObject* args) {
    if (!has_size(args, 2)) return nullptr;
    const char* name = item_str(args, 0);
    long long generation = 2;
    if (!name || !item_ll(args, 1, generation, 2)) return nullptr;
    GcTrigger trigger = GcTrigger::Automatic;
    const CyclesConfig& c = settings().cycles;
    bool on = format::kGcTriggerNames.parse(name, &trigger) &&
              ((trigger == GcTrigger::Recompute && c.collect_recompute_garbage) ||
               (trigger == GcTrigger::Step && c.gc_every_steps > 0));
    if (!on || generation < 0 || generation > 2 || finalizing()) return new_long(3);
    if (unsafe_moment()) return new_long(2);
    switch (collect_for(trigger, static_cast<int>(generation), nullptr)) {
    case CollectResult::Collected: return new_long(0);
    case CollectResult::Budget: return new_long(1);
    case CollectResult::Unsafe: return new_long(2);
    case CollectResult::Off: break;
    }
    return new_long(3);
}

/// _retrack(objects) -> how many were re-tracked: each gc-tracked object of the list is untracked
/// and tracked again, which puts it in the youngest generation, so that a generation-0 collection
/// frees the garbage an explained collection saved instead of a second full one.
PyObject* native_retrack(PyObject*, PyObject* args) {
    const CApi* a = capi();
    if (!has_size(args, 1)) return nullptr;
    PyObject* list = a->PyTuple_GetItem(args, 0);
    if (!a->PyList_Size || !a->PyList_GetItem || !a->PyObject_GC_Track || !a->PyObject_GC_UnTrack ||
        !a->PyObject_GC_IsTracked) {
        return new_long(0);  // this Python lacks them: a full collection frees the garbage instead
    }
    const ptrdiff_t n = a->PyList_Size(list);
    if (n < 0) return nullptr;
    long long done = 0;
    for (ptrdiff_t i = 0; i < n; ++i) {
        PyObject* o = a->PyList_GetItem(list, i);  // borrowed; the list keeps it alive
        if (!o || a->PyObject_GC_IsTracked(o) != 1) continue;
        a->PyObject_GC_UnTrack(o);
        a->PyObject_GC_Track(o);
        ++done;
    }
    return new_long(done);
}

/// _explain_begin(objects, tensors, cuda_bytes, analysis_ns, complete) -> the explanation's id
/// (0: not written); the Y of the collection in progress on this thread will name it.
PyObject* native_explain_begin(PyObject*, PyObject* args) {
    long long v[5];
    if (!ll_args(args, v, 5)) return nullptr;
    for (long long x : v) {
        if (x < 0) return new_long(0);
    }
    uint32_t id = recorder().record_explanation(static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1]),
                                                static_cast<uint64_t>(v[2]), v[3], v[4] != 0);
    note_explanation(id);
    return new_long(id);
}

/// _explain_group(id, kind, count, cuda_bytes, name) -> 1 written, 0 not (an unknown kind).
PyObject* native_explain_group(PyObject*, PyObject* args) {
    if (!has_size(args, 5)) return nullptr;
    long long id = 0, count = 0, bytes = 0;
    const char* kind = item_str(args, 1);
    const char* name = kind ? item_str(args, 4) : nullptr;
    if (!name || !item_ll(args, 0, id) || !item_ll(args, 2, count) || !item_ll(args, 3, bytes)) return nullptr;
    format::rec::GarbageGroup u;
    if (id <= 0 || count < 0 || bytes < 0 || !format::kGarbageKindNames.parse(kind, &u.kind)) return new_long(0);
    u.explain = static_cast<uint32_t>(id);
    u.count = static_cast<uint64_t>(count);
    u.cuda_bytes = static_cast<uint64_t>(bytes);
    u.name = name;
    recorder().record_garbage_group(u);
    return new_long(1);
}

/// _explain_tensor(id, device, addr, size, how, category, holder or None) -> 1 written, 0 not.
PyObject* native_explain_tensor(PyObject*, PyObject* args) {
    if (!has_size(args, 7)) return nullptr;
    long long v[4];
    for (int i = 0; i < 4; ++i) {
        if (!item_ll(args, i, v[i])) return nullptr;
    }
    const char* how = item_str(args, 4);
    const char* category = how ? item_str(args, 5) : nullptr;
    if (!category) return nullptr;
    const char* holder = item_str(args, 6, true);
    if (!holder && capi()->PyErr_Occurred()) return nullptr;
    format::rec::GarbageTensor y;
    if (v[0] <= 0 || v[1] < -1 || v[1] > format::kMaxDevice || v[2] < 0 || v[3] < 0 ||
        !format::kHeldHowNames.parse(how, &y.how) || !format::kCategoryNames.parse(category, &y.category) ||
        !format::is_tensor_category(y.category)) {
        return new_long(0);
    }
    y.explain = static_cast<uint32_t>(v[0]);
    y.device = static_cast<int>(v[1]);
    y.addr = static_cast<uint64_t>(v[2]);
    y.size = static_cast<uint64_t>(v[3]);
    if (holder) y.holder = holder;
    recorder().record_garbage_tensor(y);
    return new_long(1);
}

/// _explain_chain(id, addr, step, object, edge or None) -> 1 written, 0 not.
PyObject* native_explain_chain(PyObject*, PyObject* args) {
    if (!has_size(args, 5)) return nullptr;
    long long v[3];
    for (int i = 0; i < 3; ++i) {
        if (!item_ll(args, i, v[i])) return nullptr;
    }
    const char* object = item_str(args, 3);
    if (!object) return nullptr;
    const char* edge = item_str(args, 4, true);
    if (!edge && capi()->PyErr_Occurred()) return nullptr;
    if (v[0] <= 0 || v[1] < 0 || v[2] < 0 || v[2] > 0xffffffffLL) return new_long(0);
    format::rec::ChainStep r;
    r.explain = static_cast<uint32_t>(v[0]);
    r.addr = static_cast<uint64_t>(v[1]);
    r.step = static_cast<uint32_t>(v[2]);
    r.object = object;
    if (edge) r.edge = edge;
    recorder().record_chain_step(r);
    return new_long(1);
}

PyMethodDef g_cycles_natives[] = {
    {"_collect", native_collect, METH_VARARGS, nullptr},
    {"_retrack", native_retrack, METH_VARARGS, nullptr},
    {"_explain_begin", native_explain_begin, METH_VARARGS, nullptr},
    {"_explain_group", native_explain_group, METH_VARARGS, nullptr},
    {"_explain_tensor", native_explain_tensor, METH_VARARGS, nullptr},
    {"_explain_chain", native_explain_chain, METH_VARARGS, nullptr},
};

bool set_value(PyObject* ns, const char* name, PyObject* value) {
    Ref v(value);
    return v && capi()->PyObject_SetAttrString(ns, name, v.get()) == 0;
}

}  // namespace

bool install_cycles(PyObject* ns) {
    const CApi* a = capi();
    const CyclesConfig& c = settings().cycles;
    // The switches as the namespace's constants, read by memguard_cycles.py's install and triggers.
    if (!add_methods(ns, g_cycles_natives, sizeof g_cycles_natives / sizeof g_cycles_natives[0]) ||
        !set_value(ns, "RECOMPUTE", new_long(c.collect_recompute_garbage ? 1 : 0)) ||
        !set_value(ns, "RECOMPUTE_FUNCTIONS", a->PyUnicode_FromString(c.recompute_functions)) ||
        !set_value(ns, "GC_EVERY_STEPS", new_long(c.gc_every_steps)) ||
        !set_value(ns, "GC_GENERATION", new_long(c.gc_generation)) ||
        !set_value(ns, "EXPLAIN", new_long(c.explain == ExplainCycles::Off ? 0 : 1)) ||
        !run_source(ns, embedded::kMemguardCyclesPy) || !run_source(ns, embedded::kMemguardExplainPy)) {
        return false;
    }
    if (c.explain != ExplainCycles::Off) {
        PyObject* explainer = a->PyObject_GetAttrString(ns, "explained_collect");  // kept for the process
        if (!explainer) return false;
        set_explainer(explainer);
    }
    return true;
}

}  // namespace memguard::python

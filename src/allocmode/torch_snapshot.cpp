#include "allocmode/torch_snapshot.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "alloc/history.h"
#include "allocmode/cuda_backend.h"
#include "allocmode/torch_alloc_conf.h"
#include "allocmode/tracking_allocator.h"
#include "common/errno_keeper.h"
#include "common/log.h"
#include "python/pystack.h"

namespace memguard::allocmode {

std::atomic<bool> g_history_free_stacks{false};

namespace {

using namespace python;  // the C API resolved at run time (capi.h)

track::Recorder* g_rec = nullptr;
std::atomic<bool> g_history_on{false};  // _cuda_isHistoryEnabled
std::atomic<bool> g_stacks_all{false};  // stacks='all': native frames too
// The recorder's report epoch when the history was configured: a fork child starts its stack ids
// over, so sites recorded before its fork would name the child's stacks (they get no frames).
std::atomic<uint32_t> g_history_epoch{0};

// --- building Python objects ---------------------------------------------------------------------

/// Sets d[key] = value, stealing value; false (exception set) on failure.
bool put(PyObject* d, const char* key, PyObject* value) {
    if (!value) return false;
    const int r = capi()->PyDict_SetItemString(d, key, value);
    capi()->Py_DecRef(value);
    return r == 0;
}
PyObject* py_int(long long v) { return capi()->PyLong_FromLongLong(v); }
PyObject* py_uint(unsigned long long v) { return capi()->PyLong_FromUnsignedLongLong(v); }
PyObject* py_str(const char* s) { return capi()->PyUnicode_FromString(s); }
PyObject* py_str(const std::string& s) { return py_str(s.c_str()); }
PyObject* py_bool(bool b) { return capi()->PyBool_FromLong(b ? 1 : 0); }
bool append(PyObject* list, PyObject* value) {
    if (!value) return false;
    const int r = capi()->PyList_Append(list, value);
    capi()->Py_DecRef(value);
    return r == 0;
}
PyObject* pair(uint64_t a, uint64_t b) {
    const CApi* api = capi();
    PyObject* t = api->PyTuple_New(2);
    PyObject* x = py_uint(a);
    PyObject* y = py_uint(b);
    if (!t || !x || !y) {
        for (PyObject* p : {t, x, y})
            if (p) api->Py_DecRef(p);
        return nullptr;
    }
    api->PyTuple_SetItem(t, 0, x);  // steals
    api->PyTuple_SetItem(t, 1, y);
    return t;
}

/// RuntimeError(text); returns nullptr for the caller to return.
PyObject* raise(const std::string& text) {
    const CApi* api = capi();
    api->PyErr_SetString(api->exc_runtime_error, text.c_str());
    return nullptr;
}

// --- frames --------------------------------------------------------------------------------------

struct NativeFrame {
    std::string name, filename;
};

/// A return address as dladdr names it: the function (demangled) and its object file; no line.
NativeFrame symbolize(uintptr_t ip) {
    NativeFrame f{"??", "??"};
    Dl_info info{};
    // A return address points after the call: look up the call itself.
    if (dladdr(reinterpret_cast<void*>(ip - 1), &info) == 0) return f;
    if (info.dli_fname) f.filename = info.dli_fname;
    if (info.dli_sname) {
        int status = -1;
        char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
        f.name = status == 0 && demangled ? demangled : info.dli_sname;
        std::free(demangled);
    }
    return f;
}

PyObject* frame_dict(const char* filename, long long line, const char* name) {
    Ref d(capi()->PyDict_New());
    if (!d || !put(d.get(), "filename", py_str(filename)) || !put(d.get(), "line", py_int(line)) ||
        !put(d.get(), "name", py_str(name)))
        return nullptr;
    return d.release();
}

/// The frame lists of the sites a snapshot names, built once per site: native frames (innermost
/// first, with stacks='all') and then the Python stack (innermost first), as PyTorch's frames run.
class Frames {
public:
    Frames(const std::vector<alloc::DeviceSnapshot>& snaps, track::Recorder& rec) {
        if (rec.report_epoch() != g_history_epoch.load(std::memory_order_relaxed)) {
            stale_ = true;  // sites of an earlier report (a fork parent's): no frames rather than wrong ones
            return;
        }
        std::unordered_set<uint32_t> native;
        auto want = [&](bool has, alloc::SiteId site) {
            if (has && site) sites_.emplace(site, nullptr);
        };
        for (const auto& s : snaps) {
            for (const auto& seg : s.segments) {
                want(seg.has_context, seg.site);
                for (const auto& b : seg.blocks) want(b.has_context, b.site);
            }
            for (const auto& e : s.trace) want(e.has_context, e.site);
        }
        if (g_stacks_all.load(std::memory_order_relaxed)) {
            for (const auto& [site, list] : sites_)
                if (uint32_t id = static_cast<uint32_t>(site)) native.insert(id);
            rec.stack_frames(native, &native_ips_);
        }
    }
    ~Frames() {
        for (auto& [site, list] : sites_)
            if (list) capi()->Py_DecRef(list);
        if (empty_) capi()->Py_DecRef(empty_);
    }
    Frames(const Frames&) = delete;
    Frames& operator=(const Frames&) = delete;

    /// A new reference to the frame list of `site` (empty when it has none); nullptr on failure.
    PyObject* list(bool has_context, alloc::SiteId site) {
        PyObject* l = nullptr;
        if (!has_context || site == 0 || stale_) {
            l = empty();
        } else {
            auto it = sites_.find(site);
            if (it == sites_.end()) return capi()->PyList_New(0);
            if (it->second == nullptr) it->second = build(site);
            l = it->second;
        }
        if (l) capi()->Py_IncRef(l);
        return l;
    }
    PyObject* empty() {
        if (!empty_) empty_ = capi()->PyList_New(0);
        return empty_;
    }

private:
    PyObject* build(alloc::SiteId site) {
        Ref l(capi()->PyList_New(0));
        if (!l) return nullptr;
        auto nat = native_ips_.find(static_cast<uint32_t>(site));
        if (nat != native_ips_.end()) {
            for (uintptr_t ip : nat->second) {
                auto [it, fresh] = symbols_.try_emplace(ip);
                if (fresh) it->second = symbolize(ip);
                if (!append(l.get(), frame_dict(it->second.filename.c_str(), 0, it->second.name.c_str())))
                    return nullptr;
            }
        }
        std::vector<PythonFrameText> py;
        if (python_stack_frames(static_cast<uint32_t>(site >> 32), &py)) {
            for (const PythonFrameText& f : py)
                if (!append(l.get(), frame_dict(f.filename.c_str(), f.line, f.name.c_str()))) return nullptr;
        }
        return l.release();
    }

    std::unordered_map<alloc::SiteId, PyObject*> sites_;  // owned lists
    std::unordered_map<uint32_t, std::vector<uintptr_t>> native_ips_;
    std::unordered_map<uintptr_t, NativeFrame> symbols_;
    PyObject* empty_ = nullptr;  // owned
    bool stale_ = false;
};

// --- the snapshot --------------------------------------------------------------------------------

const char* state_name(alloc::BlockInfo::State s) {
    switch (s) {
    case alloc::BlockInfo::State::Allocated: return "active_allocated";
    case alloc::BlockInfo::State::Pending: return "active_pending_free";
    case alloc::BlockInfo::State::Free: break;
    }
    return "inactive";
}

PyObject* segment_dict(const alloc::SnapshotSegment& s, Frames& frames) {
    Ref d(capi()->PyDict_New());
    if (!d) return nullptr;
    PyObject* o = d.get();
    bool ok = put(o, "device", py_int(s.device)) && put(o, "address", py_uint(s.address)) &&
              put(o, "total_size", py_uint(s.total_size)) && put(o, "allocated_size", py_uint(s.allocated_size)) &&
              put(o, "active_size", py_uint(s.active_size)) && put(o, "requested_size", py_uint(s.requested_size)) &&
              put(o, "stream", py_int(static_cast<long long>(s.stream))) &&
              put(o, "segment_type", py_str(s.large ? "large" : "small")) &&
              put(o, "segment_pool_id", pair(s.pool.first, s.pool.second)) &&
              put(o, "is_expandable", py_bool(s.expandable)) && put(o, "frames", frames.list(s.has_context, s.site));
    if (!ok) return nullptr;
    Ref blocks(capi()->PyList_New(0));
    if (!blocks) return nullptr;
    for (const alloc::SnapshotBlock& b : s.blocks) {
        Ref bd(capi()->PyDict_New());
        if (!bd) return nullptr;
        PyObject* x = bd.get();
        if (!put(x, "address", py_uint(b.address)) || !put(x, "size", py_uint(b.size)) ||
            !put(x, "requested_size", py_uint(b.requested)) || !put(x, "state", py_str(state_name(b.state))) ||
            !put(x, "frames", frames.list(b.has_context, b.site)) || !append(blocks.get(), bd.release()))
            return nullptr;
    }
    if (!put(o, "blocks", blocks.release())) return nullptr;
    return d.release();
}

PyObject* trace_dict(const alloc::TraceEntry& e, Frames& frames) {
    Ref d(capi()->PyDict_New());
    if (!d) return nullptr;
    PyObject* o = d.get();
    const bool oom = e.action == alloc::TraceAction::Oom;
    bool ok = put(o, "action", py_str(alloc::trace_action_name(e.action))) &&
              put(o, oom ? "device_free" : "addr", py_uint(e.addr)) && put(o, "size", py_uint(e.size)) &&
              put(o, "stream", py_int(static_cast<long long>(e.stream))) && put(o, "time_us", py_int(e.time_us)) &&
              put(o, "compile_context", py_str("N/A")) &&
              put(o, "user_metadata", py_str(e.user_metadata ? *e.user_metadata : std::string()));
    // PyTorch gives frames only to the entries whose stacks it kept.
    if (ok && e.has_context) ok = put(o, "frames", frames.list(true, e.site));
    return ok ? d.release() : nullptr;
}

/// allocator_settings: PYTORCH_CUDA_ALLOC_CONF and what memguard's allocator applies of it.
PyObject* settings_dict() {
    const char* env = secure_getenv("PYTORCH_CUDA_ALLOC_CONF");
    const TorchAllocConf conf = parse_torch_alloc_conf(env);
    // The allocator's setting (_set_allocator_settings may have changed it), else the variable's.
    const alloc::CachingAllocator* al = existing_allocator();
    const bool expandable = al ? al->expandable_segments() : conf.expandable_segments.value_or(false);
    const double gc_threshold = al ? al->config().garbage_collection_threshold : conf.garbage_collection_threshold;
    Ref d(capi()->PyDict_New());
    if (!d) return nullptr;
    PyObject* o = d.get();
    Ref roundup(capi()->PyDict_New());
    if (!roundup) return nullptr;
    // PyTorch's 16 power-of-two intervals, keyed "1", "2", "4", ...; one number applies to all.
    unsigned long long key = 1;
    for (int i = 0; i < 16; ++i, key *= 2)
        if (!put(roundup.get(), std::to_string(key).c_str(), py_int(conf.roundup_power2_divisions))) return nullptr;
    const long long max_split = conf.max_split_size == static_cast<size_t>(-1)
                                    ? -1
                                    : static_cast<long long>(conf.max_split_size);
    bool ok = put(o, "PYTORCH_CUDA_ALLOC_CONF", py_str(env ? env : "")) &&
              put(o, "max_split_size", py_int(max_split)) &&
              put(o, "garbage_collection_threshold", capi()->PyFloat_FromDouble(gc_threshold)) &&
              put(o, "expandable_segments", py_bool(expandable)) && put(o, "pinned_num_register_threads", py_int(1)) &&
              put(o, "release_lock_on_cudamalloc", py_bool(false)) &&
              put(o, "pinned_use_cuda_host_register", py_bool(false)) &&
              put(o, "graph_capture_record_stream_reuse", py_bool(false)) &&
              put(o, "roundup_power2_divisions", roundup.release());
    return ok ? d.release() : nullptr;
}

bool api_ready() {
    const CApi* a = capi();
    return a->PyList_New && a->PyBool_FromLong && a->PyFloat_FromDouble && a->PyErr_SetString && a->exc_runtime_error &&
           a->PyDict_New && a->PyLong_FromLongLong && a->PyLong_FromUnsignedLongLong;
}

/// torch._C._cuda_memorySnapshot(arg): arg None, (pool_a, pool_b) or (pool_a, pool_b,
/// include_traces) as torch.cuda.memory passes it; pool (0, 0) means every pool.
PyObject* memory_snapshot(PyObject*, PyObject* args) {
    const CApi* a = capi();
    alloc::MempoolId pool;
    bool include_trace = true;
    PyObject* arg = a->PyTuple_Size(args) > 0 ? a->PyTuple_GetItem(args, 0) : nullptr;
    if (arg && arg != a->none) {
        const ptrdiff_t n = a->PyTuple_Size(arg);
        if (n < 2) {
            a->PyErr_Clear();
            return raise("_cuda_memorySnapshot: expected None or a tuple (pool id, pool id[, include_traces])");
        }
        pool.first = static_cast<uint64_t>(a->PyLong_AsLongLong(a->PyTuple_GetItem(arg, 0)));
        pool.second = static_cast<uint64_t>(a->PyLong_AsLongLong(a->PyTuple_GetItem(arg, 1)));
        if (n >= 3) include_trace = a->PyObject_IsTrue(a->PyTuple_GetItem(arg, 2)) == 1;
        if (a->PyErr_Occurred()) return nullptr;
    }
    // The core's state is copied under each device's lock, one device at a time; the Python
    // objects are built afterwards (the GIL is never taken under the core's lock).
    std::vector<alloc::DeviceSnapshot> snaps;
    if (alloc::CachingAllocator* al = existing_allocator()) {
        for (int d = 0; d < al->device_count(); ++d) snaps.push_back(al->take_snapshot(d, pool, include_trace));
    }
    Frames frames(snaps, *g_rec);
    Ref result(a->PyDict_New());
    Ref segments(a->PyList_New(0));
    Ref traces(a->PyList_New(0));
    if (!result || !segments || !traces) return nullptr;
    for (const auto& s : snaps) {
        for (const auto& seg : s.segments)
            if (!append(segments.get(), segment_dict(seg, frames))) return nullptr;
        Ref trace(a->PyList_New(0));
        if (!trace) return nullptr;
        for (const auto& e : s.trace)
            if (!append(trace.get(), trace_dict(e, frames))) return nullptr;
        if (!append(traces.get(), trace.release())) return nullptr;
    }
    if (!put(result.get(), "segments", segments.release()) || !put(result.get(), "device_traces", traces.release()) ||
        !put(result.get(), "allocator_settings", settings_dict()) ||
        !put(result.get(), "external_annotations", a->PyList_New(0)))
        return nullptr;
    return result.release();
}
PyMethodDef g_snapshot_def{"_cuda_memorySnapshot", memory_snapshot, METH_VARARGS,
                           "memguard (MEMGUARD_ALLOCATOR=memguard): the allocator's segments, blocks and history"};

// --- recording -----------------------------------------------------------------------------------

/// Positional argument i, else keyword `name`, else nullptr (borrowed).
PyObject* argument(PyObject* args, PyObject* kwargs, ptrdiff_t i, const char* name) {
    const CApi* a = capi();
    if (a->PyTuple_Size(args) > i) return a->PyTuple_GetItem(args, i);
    return kwargs ? a->PyDict_GetItemString(kwargs, name) : nullptr;
}

/// A str argument into *out; *present false for None or absent. False (exception set) when not a str.
bool string_arg(PyObject* v, std::string* out, bool* present) {
    const CApi* a = capi();
    *present = v && v != a->none;
    if (!*present) return true;
    const char* s = a->PyUnicode_AsUTF8(v);
    if (!s) return false;
    *out = s;
    return true;
}

struct Request {
    bool enabled = false;
    std::string context = "all", stacks = "all";
    bool has_context = true;
    size_t max_entries = SIZE_MAX;
    bool clear = false;
    uint32_t skip = 0;
};

PyObject* apply(const Request& r) {
    alloc::CachingAllocator* al = allocator(*g_rec);  // PyTorch initializes CUDA here too
    if (!al) return raise("memory history: no CUDA device (memguard's allocator has none to record)");
    alloc::HistoryConfig c;
    c.enabled = r.enabled;
    c.context = !r.has_context         ? alloc::ContextLevel::Never
                : r.context == "all"   ? alloc::ContextLevel::All
                : r.context == "alloc" ? alloc::ContextLevel::Alloc
                                       : alloc::ContextLevel::State;
    c.max_entries = r.max_entries;
    c.skip_mask = r.skip;
    c.clear = r.clear;
    al->set_history(c);
    g_history_epoch.store(g_rec->report_epoch(), std::memory_order_relaxed);
    g_history_on.store(r.enabled, std::memory_order_relaxed);
    g_stacks_all.store(r.stacks == "all", std::memory_order_relaxed);
    g_history_free_stacks.store(r.enabled && c.context == alloc::ContextLevel::All, std::memory_order_relaxed);
    return new_none();
}

bool skip_actions(PyObject* v, uint32_t* mask) {
    const CApi* a = capi();
    if (!v || v == a->none) return true;
    const ptrdiff_t n = a->PyList_Size(v);
    if (n < 0) {
        a->PyErr_Clear();
        raise("skip_actions must be a list of action names");
        return false;
    }
    for (ptrdiff_t i = 0; i < n; ++i) {
        const char* s = a->PyUnicode_AsUTF8(a->PyList_GetItem(v, i));
        alloc::TraceAction act;
        if (!s || !alloc::trace_action_from_name(s, &act)) {
            a->PyErr_Clear();
            raise(std::string("Invalid action in skip_actions: ") + (s ? s : "(not a str)"));
            return false;
        }
        *mask |= 1u << static_cast<unsigned>(act);
    }
    return true;
}

/// torch._C._cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history,
/// compile_context, global_record_annotations, skip_actions): PyTorch 2.4's four arguments and
/// the later ones, positional or by name.
PyObject* record_history(PyObject*, PyObject* args, PyObject* kwargs) {
    const CApi* a = capi();
    Request r;
    std::string enabled;
    bool has_enabled = false;
    if (!string_arg(argument(args, kwargs, 0, "enabled"), &enabled, &has_enabled) ||
        !string_arg(argument(args, kwargs, 1, "context"), &r.context, &r.has_context))
        return nullptr;
    if (!argument(args, kwargs, 1, "context")) {
        r.has_context = true;  // absent: PyTorch's default 'all'
        r.context = "all";
    }
    bool has_stacks = false;
    if (!string_arg(argument(args, kwargs, 2, "stacks"), &r.stacks, &has_stacks)) return nullptr;
    if (!has_stacks) r.stacks = "all";
    if (has_enabled && enabled != "state" && enabled != "all")
        return raise("expected state to be 'state', 'all', or None");
    if (r.has_context && r.context != "state" && r.context != "alloc" && r.context != "all")
        return raise("expected context to be 'state', 'alloc', 'all', or None");
    if (r.stacks != "python" && r.stacks != "all") return raise("expected stacks to be 'python', or 'all'");
    if (PyObject* m = argument(args, kwargs, 3, "max_entries")) {
        const long long v = a->PyLong_AsLongLong(m);
        if (v == -1 && a->PyErr_Occurred()) return nullptr;
        r.max_entries = v < 1 ? 1 : static_cast<size_t>(v);
    }
    if (PyObject* c = argument(args, kwargs, 4, "clear_history")) r.clear = a->PyObject_IsTrue(c) == 1;
    // compile_context (5) and global_record_annotations (6) are accepted; memguard records neither
    // (entries say compile_context "N/A").
    if (!skip_actions(argument(args, kwargs, 7, "skip_actions"), &r.skip)) return nullptr;
    r.enabled = has_enabled;
    // As PyTorch: 'state' keeps stacks of live blocks and a ring of one entry.
    if (!has_enabled || enabled != "all") r.max_entries = 1;
    return apply(r);
}
PyMethodDef g_record_def{"_cuda_record_memory_history",
                         reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(record_history)),
                         METH_VARARGS | METH_KEYWORDS,
                         "memguard (MEMGUARD_ALLOCATOR=memguard): records the allocator's memory history"};

/// torch._C._cuda_record_memory_history_legacy(enabled, record_context, trace_alloc_max_entries,
/// trace_alloc_record_context, record_context_cpp, clear_history, compile_context,
/// global_record_annotations, skip_actions).
PyObject* record_history_legacy(PyObject*, PyObject* args, PyObject* kwargs) {
    const CApi* a = capi();
    auto flag = [&](ptrdiff_t i, const char* name, bool dflt) {
        PyObject* v = argument(args, kwargs, i, name);
        return v ? a->PyObject_IsTrue(v) == 1 : dflt;
    };
    Request r;
    r.enabled = flag(0, "enabled", false);
    const bool record_context = flag(1, "record_context", true);
    const bool trace_context = flag(3, "trace_alloc_record_context", false);
    r.has_context = trace_context || record_context;
    r.context = trace_context ? "alloc" : "state";
    r.stacks = flag(4, "record_context_cpp", false) ? "all" : "python";
    r.clear = flag(5, "clear_history", false);
    r.max_entries = 1;
    if (PyObject* m = argument(args, kwargs, 2, "trace_alloc_max_entries")) {
        const long long v = a->PyLong_AsLongLong(m);
        if (v == -1 && a->PyErr_Occurred()) return nullptr;
        r.max_entries = v < 1 ? 1 : static_cast<size_t>(v);
    }
    if (!skip_actions(argument(args, kwargs, 8, "skip_actions"), &r.skip)) return nullptr;
    return apply(r);
}
PyMethodDef g_record_legacy_def{"_cuda_record_memory_history_legacy",
                                reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(record_history_legacy)),
                                METH_VARARGS | METH_KEYWORDS,
                                "memguard (MEMGUARD_ALLOCATOR=memguard): records the allocator's memory history"};

PyObject* history_enabled(PyObject*, PyObject*) { return py_bool(g_history_on.load(std::memory_order_relaxed)); }
PyMethodDef g_enabled_def{"_cuda_isHistoryEnabled", history_enabled, METH_NOARGS,
                          "memguard (MEMGUARD_ALLOCATOR=memguard): whether the memory history records"};

/// torch._C._cuda_setMemoryMetadata(text) (torch.cuda.memory._set_memory_metadata): the text the
/// current device's later trace entries carry as their user_metadata; "" clears it.
PyObject* set_metadata(PyObject*, PyObject* text) {
    const char* s = capi()->PyUnicode_AsUTF8(text);
    if (!s) return nullptr;  // not a str: Python's TypeError
    alloc::CachingAllocator* al = allocator(*g_rec);
    if (!al) return raise("memory metadata: no CUDA device (memguard's allocator has none to record)");
    al->set_user_metadata(current_device(), s);
    return new_none();
}
PyMethodDef g_set_metadata_def{"_cuda_setMemoryMetadata", set_metadata, METH_O,
                               "memguard (MEMGUARD_ALLOCATOR=memguard): sets the memory history's user metadata"};

/// torch._C._cuda_getMemoryMetadata() (torch.cuda.memory._get_memory_metadata).
PyObject* get_metadata(PyObject*, PyObject*) {
    alloc::CachingAllocator* al = allocator(*g_rec);
    return py_str(al ? al->user_metadata(current_device()) : std::string());
}
PyMethodDef g_get_metadata_def{"_cuda_getMemoryMetadata", get_metadata, METH_NOARGS,
                               "memguard (MEMGUARD_ALLOCATOR=memguard): the memory history's user metadata"};

}  // namespace

alloc::SiteId history_free_site_slow(track::Recorder& rec) {
    if (!rec.active()) return 0;
    ErrnoKeeper keep_errno;
    uint32_t native = 0;
    if (g_stacks_all.load(std::memory_order_relaxed)) {
        uintptr_t ips[track::Recorder::kStackCapacity];
        native = rec.intern_stack(ips, rec.capture_stack(ips));
    }
    return (uint64_t{rec.python_stack_id()} << 32) | native;
}

void install_snapshot_functions(PyObject* torch_c, track::Recorder& rec) {
    g_rec = &rec;
    const CApi* a = capi();
    if (!api_ready()) {
        MG_LOG_WARN("allocator mode: this Python lacks functions memguard's snapshots need; "
                    "torch.cuda.memory._snapshot and _record_memory_history stay unsupported");
        return;
    }
    for (PyMethodDef* def : {&g_snapshot_def, &g_record_def, &g_record_legacy_def, &g_enabled_def, &g_set_metadata_def,
                             &g_get_metadata_def}) {
        Ref original(a->PyObject_GetAttrString(torch_c, def->ml_name));
        if (!original) {  // not in this PyTorch
            a->PyErr_Clear();
            continue;
        }
        Ref fn(a->PyCFunction_NewEx(def, nullptr, nullptr));
        if (!fn || a->PyObject_SetAttrString(torch_c, def->ml_name, fn.get()) != 0) {
            a->PyErr_Clear();
            MG_LOG_WARN("allocator mode: cannot replace torch._C.{}", def->ml_name);
        }
    }
}

}  // namespace memguard::allocmode

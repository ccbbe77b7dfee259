// Python allocation sites: the calling thread's Python stack, interned as p/P records.
// Runs on the CUDA hook path of a thread that already holds the GIL; never takes the GIL.
#include <mutex>
#include <unordered_map>
#include <vector>

#include "python/capi.h"
#include "python/hook.h"
#include "python/state.h"
#include "track/line.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

constexpr int kMaxPythonFrames = 128;

struct FrameKey {
    PyObject* code;
    int line;
    bool operator==(const FrameKey& o) const { return code == o.code && line == o.line; }
};
struct FrameKeyHash {
    size_t operator()(const FrameKey& k) const {
        return std::hash<const void*>()(k.code) * 31u + static_cast<size_t>(k.line);
    }
};
struct StackHash {
    size_t operator()(const std::vector<uint32_t>& v) const {
        size_t h = v.size();
        for (uint32_t x : v) h = h * 1000003u ^ x;
        return h;
    }
};

struct Tables {
    std::mutex mu;
    uint32_t epoch = 0;
    std::unordered_map<FrameKey, uint32_t, FrameKeyHash> frames;
    std::unordered_map<std::vector<uint32_t>, uint32_t, StackHash> stacks;
};

Tables& tables() {
    static Tables* t = new Tables();  // leaked: used until the process ends
    return *t;
}

std::string attr_string(PyObject* obj, const char* name) {
    const CApi* a = capi();
    Ref v(a->PyObject_GetAttrString(obj, name));
    const char* s = v ? a->PyUnicode_AsUTF8(v.get()) : nullptr;
    return s ? std::string(s) : std::string("?");
}

/// Interns one frame; writes its p record when new. Keeps a reference to the code object so its
/// address can never be reused by another code object. Caller holds tables().mu.
uint32_t intern_frame(Tables& t, PyObject* code, int line, track::Recorder& rec) {
    auto [it, inserted] = t.frames.try_emplace(FrameKey{code, line}, 0);
    if (!inserted) return it->second;
    it->second = static_cast<uint32_t>(t.frames.size());
    capi()->Py_IncRef(code);
    track::Line p('p');
    p.dec(it->second).sdec(line).str(attr_string(code, "co_name")).str(attr_string(code, "co_filename"));
    rec.append_records(p.finish());
    return it->second;
}

}  // namespace

uint32_t capture_python_stack() {
    const CApi* a = capi();
    if (!interpreter_running() || !a->PyGILState_Check()) return 0;
    track::Recorder& rec = track::Recorder::instance();
    if (!rec.recording()) return 0;
    ErrorGuard keep_error;

    struct Raw {
        PyObject* code;
        int line;
    };
    Raw raw[kMaxPythonFrames];
    int n = 0;
    PyFrameObject* f = a->PyEval_GetFrame();  // borrowed
    if (!f) return 0;
    a->Py_IncRef(reinterpret_cast<PyObject*>(f));
    while (f && n < kMaxPythonFrames) {
        auto* code = reinterpret_cast<PyObject*>(a->PyFrame_GetCode(f));  // new reference
        raw[n++] = Raw{code, a->PyFrame_GetLineNumber(f)};
        PyFrameObject* back = a->PyFrame_GetBack(f);  // new reference or NULL
        a->Py_DecRef(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    if (f) a->Py_DecRef(reinterpret_cast<PyObject*>(f));

    Tables& t = tables();
    std::lock_guard<std::mutex> lock(t.mu);
    if (t.epoch != rec.report_epoch()) {  // a fork child's new report: start over
        t.frames.clear();
        t.stacks.clear();
        t.epoch = rec.report_epoch();
    }
    std::vector<uint32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        ids.push_back(intern_frame(t, raw[i].code, raw[i].line, rec));
        a->Py_DecRef(raw[i].code);
    }
    auto [it, inserted] = t.stacks.try_emplace(std::move(ids), 0);
    if (inserted) {
        it->second = static_cast<uint32_t>(t.stacks.size());
        track::Line s('P');
        s.dec(it->second);
        for (uint32_t id : it->first) s.dec(id);
        rec.append_records(s.finish());
    }
    return it->second;
}

}  // namespace memguard::python

// Python allocation sites: the calling thread's Python stack, interned as p/P records.
// Runs on the CUDA hook path; never takes the GIL. With the calibrated GIL-free walker
// (frames.h) any thread with Python frames gets its stack; otherwise only a thread that holds the
// GIL does, through the public API.
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "python/capi.h"
#include "python/frames.h"
#include "python/hook.h"
#include "python/state.h"
#include "track/line.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

constexpr int kMaxPythonFrames = 128;

// A frame: a code object at a line. The code object's name and filename objects are part of the
// key, so that a code object allocated later at a freed one's address is never confused with it.
struct FrameKey {
    const void* code;
    const void* name;
    const void* filename;
    int line;
    bool operator==(const FrameKey& o) const {
        return code == o.code && name == o.name && filename == o.filename && line == o.line;
    }
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

struct Captured {
    FrameKey key;
    PyObject* strong_code;  // GIL path: a new reference to drop after interning; else nullptr
};

/// The calling thread's frames through the public API (GIL held).
int capture_with_gil(Captured* out, int max) {
    const CApi* a = capi();
    int n = 0;
    PyFrameObject* f = a->PyEval_GetFrame();  // borrowed
    if (!f) return 0;
    a->Py_IncRef(reinterpret_cast<PyObject*>(f));
    while (f && n < max) {
        auto* code = reinterpret_cast<PyObject*>(a->PyFrame_GetCode(f));  // new reference
        out[n++] = Captured{FrameKey{code, nullptr, nullptr, a->PyFrame_GetLineNumber(f)}, code};
        PyFrameObject* back = a->PyFrame_GetBack(f);  // new reference or NULL
        a->Py_DecRef(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    if (f) a->Py_DecRef(reinterpret_cast<PyObject*>(f));
    return n;
}

/// The calling thread's frames read directly (GIL or not; frames.h).
int capture_without_gil(Captured* out, int max) {
    RawFrame raw[kMaxPythonFrames];
    int n = walk_frames(raw, max < kMaxPythonFrames ? max : kMaxPythonFrames);
    for (int i = 0; i < n; ++i) {
        const void* code = raw[i].code;
        out[i] = Captured{FrameKey{code, code_name_object(code), code_filename_object(code),
                                   code_line(code, raw[i].lasti)},
                          nullptr};
    }
    return n;
}

/// Interns one frame; writes its p record when new. On the GIL path the table keeps a reference
/// to the code object, so that its address can never be reused. Caller holds tables().mu.
uint32_t intern_frame(Tables& t, const Captured& c, track::Recorder& rec) {
    auto [it, inserted] = t.frames.try_emplace(c.key, 0);
    if (!inserted) return it->second;
    it->second = static_cast<uint32_t>(t.frames.size());
    std::string name, filename;
    if (c.strong_code) {
        capi()->Py_IncRef(c.strong_code);
        name = attr_string(c.strong_code, "co_name");
        filename = attr_string(c.strong_code, "co_filename");
    } else {
        name = code_name(c.key.code);
        filename = code_filename(c.key.code);
    }
    track::Line p('p');
    p.dec(it->second).sdec(c.key.line).str(name).str(filename);
    rec.append_records(p.finish());
    return it->second;
}

}  // namespace

uint32_t capture_python_stack() {
    const CApi* a = capi();
    if (!interpreter_running()) return 0;
    track::Recorder& rec = track::Recorder::instance();
    if (!rec.recording()) return 0;
    bool with_gil = !frames_calibrated();
    if (with_gil && !a->PyGILState_Check()) return 0;

    Captured frames[kMaxPythonFrames];
    int n;
    if (with_gil) {
        ErrorGuard keep_error;
        n = capture_with_gil(frames, kMaxPythonFrames);
    } else {
        n = capture_without_gil(frames, kMaxPythonFrames);
    }
    if (n == 0) return 0;

    Tables& t = tables();
    std::lock_guard<std::mutex> lock(t.mu);
    if (t.epoch != rec.report_epoch()) {  // a fork child's new report: start over
        t.frames.clear();
        t.stacks.clear();
        t.epoch = rec.report_epoch();
    }
    std::vector<uint32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    {
        std::unique_ptr<ErrorGuard> keep_error(with_gil ? new ErrorGuard() : nullptr);
        for (int i = 0; i < n; ++i) {
            ids.push_back(intern_frame(t, frames[i], rec));
            if (frames[i].strong_code) a->Py_DecRef(frames[i].strong_code);
        }
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

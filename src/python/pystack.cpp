// Python allocation sites: the calling thread's Python stack, interned as p/P records.
// Runs on the CUDA hook path; never takes the GIL. With the calibrated GIL-free walker
// (frames.h) any thread with Python frames gets its stack; otherwise only a thread that holds the
// GIL does, through the public API.
//
// The GIL-free path runs on every tensor allocation in allocator mode, so it caches: a frame's
// line costs a linear scan of its code's line table (PyCode_Addr2Line), so it is computed once
// per (code, lasti); and a stack seen before costs one lookup instead of one per frame. Without
// the GIL no reference can be held on a code object, so a cached code address may meanwhile have
// been freed and taken by another code object: generated code compiled again, with the same name
// and filename objects and its line table at the old one's address (the allocator hands a freed
// block of the same size class back first). Every hit is therefore checked against the live code
// object: its co_firstlineno and the bytes of its line table, co_name and co_filename must equal
// what the entry was made from (CodeSnapshot). The line is a pure function of the first two and
// lasti, and a p record holds exactly the text compared, so a checked hit writes what a fresh
// computation would; address reuse cannot make a stack wrong. The price is a compare of each
// frame's line table (about 3 bytes a source line) per allocation.
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/encode.h"
#include "python/capi.h"
#include "python/frames.h"
#include "python/pystack.h"
#include "python/state.h"
#include "track/recorder.h"

namespace memguard::python {
namespace {

constexpr int kMaxPythonFrames = 128;

// GIL path: a frame is a code object (kept alive by the table's reference) at a line.
struct FrameKey {
    const void* code;
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

// GIL-free path: a frame as the walker sees it.
struct RawKey {
    const void* code;
    int lasti;
    bool operator==(const RawKey& o) const { return code == o.code && lasti == o.lasti; }
};
size_t raw_hash(const RawKey& k) {
    return std::hash<const void*>()(k.code) ^ (static_cast<size_t>(k.lasti) * 0x9E3779B97F4A7C15ull);
}
struct RawKeyHash {
    size_t operator()(const RawKey& k) const { return raw_hash(k); }
};
struct RawStackHash {
    size_t operator()(const std::vector<RawKey>& v) const {
        size_t h = v.size();
        for (const RawKey& k : v) h = h * 1000003u ^ raw_hash(k);
        return h;
    }
};

// GIL-free path: a frame interned by what its p record says.
struct ContentKey {
    int line;
    std::string name, filename;
    bool operator==(const ContentKey& o) const { return line == o.line && name == o.name && filename == o.filename; }
};
struct ContentKeyHash {
    size_t operator()(const ContentKey& k) const {
        return (std::hash<std::string>()(k.name) * 31u ^ std::hash<std::string>()(k.filename)) * 31u +
               static_cast<size_t>(k.line);
    }
};

/// What the cache entries of one code address were made from (see the top of this file).
/// `generation` changes whenever the address turns out to hold a different code object, which
/// invalidates every entry made under the old one.
struct CodeSnapshot {
    uint64_t generation = 0;
    mutable uint64_t checked_in = 0;  // the lookup (Tables::lookups) that last found it unchanged
    int firstlineno = 0;
    std::string name, filename, linetable;
    bool matches(const CodeView& v) const {
        return v.firstlineno == firstlineno && v.linetable == linetable && v.name == name && v.filename == filename;
    }
    size_t bytes() const { return name.size() + filename.size() + linetable.size(); }
    void assign(const CodeView& v, uint64_t gen) {
        generation = gen;
        firstlineno = v.firstlineno;
        name.assign(v.name);
        filename.assign(v.filename);
        linetable.assign(v.linetable);
    }
};
struct CachedFrame {
    uint32_t id;
    const CodeSnapshot* code;
    uint64_t generation;
    bool valid(const CodeView& v) const { return code && code->generation == generation && code->matches(v); }
};
struct CachedStack {
    uint32_t id;
    std::vector<CachedFrame> frames;
};

// Bounds on the GIL-free caches (not on the interned frames and stacks, which are the report's):
// past any of them all three are dropped together (cached frames point into `codes`).
constexpr size_t kMaxCachedCodes = 1u << 14;
constexpr size_t kMaxCachedFrames = 1u << 18;
constexpr size_t kMaxCachedStacks = 1u << 16;
// The snapshots' copies of line tables, names and filenames: inductor's generated functions have
// line tables of kilobytes, and a long run recompiles many of them.
constexpr size_t kMaxCachedCodeBytes = size_t{64} << 20;

struct Tables {
    std::mutex mu;
    uint32_t epoch = 0;
    uint32_t frame_ids = 0;                                             // the last p id given
    std::unordered_map<FrameKey, uint32_t, FrameKeyHash> frames;        // GIL path
    std::unordered_map<ContentKey, uint32_t, ContentKeyHash> contents;  // a p record -> its id (both paths)
    std::unordered_map<std::vector<uint32_t>, uint32_t, StackHash> stacks;
    // By id, for the reverse lookups of allocator mode's snapshots (index id - 1; the keys of
    // `contents` and `stacks`, whose nodes never move).
    std::vector<const ContentKey*> frame_by_id;
    std::vector<const std::vector<uint32_t>*> stack_by_id;
    // GIL-free caches.
    uint64_t generations = 0;
    std::unordered_map<const void*, CodeSnapshot> codes;
    size_t code_bytes = 0;  // sum of codes' bytes()
    std::unordered_map<RawKey, CachedFrame, RawKeyHash> by_lasti;
    std::unordered_map<std::vector<RawKey>, CachedStack, RawStackHash> raw_stacks;
    std::vector<RawKey> scratch;  // the stack being looked up, kept to save an allocation per call
    uint64_t lookups = 0;         // stack lookups so far: each checks a code object once

    void drop_caches() {
        raw_stacks.clear();
        by_lasti.clear();
        codes.clear();
        code_bytes = 0;
    }
    void check_epoch(const track::Recorder& rec) {
        if (epoch == rec.report_epoch()) return;
        // A fork child's new report: start over.
        frames.clear();
        contents.clear();
        stacks.clear();
        frame_by_id.clear();
        stack_by_id.clear();
        drop_caches();
        frame_ids = 0;
        epoch = rec.report_epoch();
    }
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
    PyObject* strong_code;  // a new reference, dropped after interning
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
        out[n++] = Captured{FrameKey{code, a->PyFrame_GetLineNumber(f)}, code};
        PyFrameObject* back = a->PyFrame_GetBack(f);  // new reference or NULL
        a->Py_DecRef(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    if (f) a->Py_DecRef(reinterpret_cast<PyObject*>(f));
    return n;
}

void write_frame(uint32_t id, int line, const std::string& name, const std::string& filename, track::Recorder& rec) {
    rec.append_record(format::rec::PyFrame{id, line, name, filename});
}

/// Interns one frame (GIL path); writes its p record when new. The table keeps a reference to
/// the code object, so that its address can never be reused. A frame is one id whichever path
/// interned it (the GIL path before the walker is calibrated, the walker after): both look up the
/// p record's content. Caller holds tables().mu.
uint32_t intern_frame(Tables& t, const Captured& c, track::Recorder& rec) {
    auto [it, inserted] = t.frames.try_emplace(c.key, 0);
    if (!inserted) return it->second;
    capi()->Py_IncRef(c.strong_code);
    auto [fit, new_frame] = t.contents.try_emplace(ContentKey{c.key.line, attr_string(c.strong_code, "co_name"),
                                                              attr_string(c.strong_code, "co_filename")},
                                                   0);
    if (new_frame) {
        fit->second = ++t.frame_ids;
        t.frame_by_id.push_back(&fit->first);
        write_frame(fit->second, fit->first.line, fit->first.name, fit->first.filename, rec);
    }
    it->second = fit->second;
    return it->second;
}

/// The p id of a live frame (GIL-free path), through the (code, lasti) cache; writes its p
/// record when new. Caller holds tables().mu.
CachedFrame frame_without_gil(Tables& t, const RawKey& key, const CodeView& view, track::Recorder& rec) {
    auto [it, inserted] = t.by_lasti.try_emplace(key, CachedFrame{0, nullptr, 0});
    if (!inserted && it->second.valid(view)) return it->second;
    auto [cit, new_code] = t.codes.try_emplace(key.code);
    CodeSnapshot& code = cit->second;
    if (new_code || !code.matches(view)) {
        t.code_bytes -= code.bytes();  // 0 for a new entry
        code.assign(view, ++t.generations);
        t.code_bytes += code.bytes();
    }
    auto [fit, new_frame] = t.contents.try_emplace(ContentKey{code_line(key.code, key.lasti), code.name, code.filename},
                                                   0);
    if (new_frame) {
        fit->second = ++t.frame_ids;
        t.frame_by_id.push_back(&fit->first);
        write_frame(fit->second, fit->first.line, fit->first.name, fit->first.filename, rec);
    }
    it->second = CachedFrame{fit->second, &code, code.generation};
    return it->second;
}

/// Interns a stack of p ids; writes its P record when new. Caller holds tables().mu.
uint32_t intern_stack(Tables& t, std::vector<uint32_t> ids, track::Recorder& rec) {
    auto [it, inserted] = t.stacks.try_emplace(std::move(ids), 0);
    if (inserted) {
        it->second = static_cast<uint32_t>(t.stacks.size());
        t.stack_by_id.push_back(&it->first);
        rec.append_record(format::rec::PyStack{it->second, format::Tail<uint32_t>{it->first.data(), it->first.size()}});
    }
    return it->second;
}

/// Whether a cached stack still holds for the live frames it was found for. These are all alive
/// at once, so frames that share a code address share a code object, and each address needs one
/// check (a model's stack repeats nn.Module's call wrappers at every level, a recursion its
/// function): a snapshot found unchanged is stamped with this lookup's number.
bool still_valid(const CachedStack& s, const RawFrame* raw, int n, uint64_t lookup) {
    for (int i = 0; i < n; ++i) {
        const CachedFrame& f = s.frames[static_cast<size_t>(i)];
        if (f.code->generation != f.generation) return false;
        if (f.code->checked_in == lookup) continue;
        if (!f.code->matches(code_view(raw[i].code))) return false;
        f.code->checked_in = lookup;
    }
    return true;
}

/// The stack id of the frames the walker read (GIL-free path). A stack seen before costs one
/// lookup plus the check of each frame's code object. Caller holds tables().mu.
uint32_t stack_without_gil(Tables& t, const RawFrame* raw, int n, track::Recorder& rec) {
    if (t.codes.size() > kMaxCachedCodes || t.code_bytes > kMaxCachedCodeBytes ||
        t.by_lasti.size() > kMaxCachedFrames || t.raw_stacks.size() > kMaxCachedStacks) {
        t.drop_caches();
    }
    t.scratch.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t.scratch[static_cast<size_t>(i)] = RawKey{raw[i].code, raw[i].lasti};
    auto hit = t.raw_stacks.find(t.scratch);
    if (hit != t.raw_stacks.end() && still_valid(hit->second, raw, n, ++t.lookups)) return hit->second.id;
    CachedStack entry;
    entry.frames.reserve(static_cast<size_t>(n));
    std::vector<uint32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        entry.frames.push_back(frame_without_gil(t, t.scratch[static_cast<size_t>(i)], code_view(raw[i].code), rec));
        ids.push_back(entry.frames.back().id);
    }
    entry.id = intern_stack(t, std::move(ids), rec);
    if (hit != t.raw_stacks.end()) {
        hit->second = std::move(entry);
        return hit->second.id;
    }
    return t.raw_stacks.emplace(t.scratch, std::move(entry)).first->second.id;
}

}  // namespace

bool python_stack_frames(uint32_t id, std::vector<PythonFrameText>* out) {
    Tables& t = tables();
    std::lock_guard<std::mutex> lock(t.mu);
    if (id == 0 || id > t.stack_by_id.size() || t.epoch != recorder().report_epoch()) return false;
    for (uint32_t f : *t.stack_by_id[id - 1]) {
        if (f == 0 || f > t.frame_by_id.size()) return false;
        const ContentKey& k = *t.frame_by_id[f - 1];
        out->push_back(PythonFrameText{k.line, k.name, k.filename});
    }
    return true;
}

void lock_stack_tables_for_fork() noexcept { tables().mu.lock(); }
void unlock_stack_tables_after_fork() noexcept { tables().mu.unlock(); }

uint32_t capture_python_stack() {
    const CApi* a = capi();
    if (!interpreter_running()) return 0;
    track::Recorder& rec = recorder();
    if (!rec.recording()) return 0;
    bool with_gil = !frames_calibrated();
    if (with_gil && !a->PyGILState_Check()) return 0;

    if (!with_gil) {
        RawFrame raw[kMaxPythonFrames];
        int n = walk_frames(raw, kMaxPythonFrames);
        if (n == 0) return 0;
        Tables& t = tables();
        std::lock_guard<std::mutex> lock(t.mu);
        t.check_epoch(rec);
        return stack_without_gil(t, raw, n, rec);
    }

    Captured frames[kMaxPythonFrames];
    int n;
    {
        ErrorGuard keep_error;
        n = capture_with_gil(frames, kMaxPythonFrames);
    }
    if (n == 0) return 0;
    Tables& t = tables();
    std::lock_guard<std::mutex> lock(t.mu);
    t.check_epoch(rec);
    std::vector<uint32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    {
        ErrorGuard keep_error;
        for (int i = 0; i < n; ++i) {
            ids.push_back(intern_frame(t, frames[i], rec));
            a->Py_DecRef(frames[i].strong_code);
        }
    }
    return intern_stack(t, std::move(ids), rec);
}

}  // namespace memguard::python

#include "python/frames.h"

#include <cstring>
#include <dlfcn.h>
#include <vector>

#include "common/log.h"
#include "python/capi.h"

namespace memguard::python {
namespace {

// Offsets of the fields the walker reads (release builds, x86-64), per CPython minor version.
struct Layout {
    size_t tstate_cframe;         // PyThreadState -> _PyCFrame* (3.13: -> current frame)
    size_t cframe_current_frame;  // _PyCFrame -> _PyInterpreterFrame* (kDirect: no _PyCFrame)
    size_t frame_code;            // _PyInterpreterFrame -> PyCodeObject*
    size_t frame_previous;        // _PyInterpreterFrame -> previous
    size_t frame_instr;           // _PyInterpreterFrame -> prev_instr (3.13: instr_ptr)
    size_t frame_owner;           // _PyInterpreterFrame -> owner (char)
    int owner_cstack;             // owner value of C-stack shim frames, -1 if none
};
constexpr size_t kDirect = SIZE_MAX;
constexpr Layout kLayout311{56, 8, 32, 48, 56, 69, -1};
constexpr Layout kLayout312{56, 0, 0, 8, 56, 70, 3};
// 3.13 has no _PyCFrame: PyThreadState holds the current frame, at an offset that calibration
// finds (72 in 3.13.0); a frame's f_executable (its code), previous and instr_ptr (the instruction
// executing, where 3.12 kept the one before it: either way PyFrame_GetLasti's byte offset from
// the first code unit) sit where 3.12 had f_code, previous and prev_instr.
constexpr Layout kLayout313{0, kDirect, 0, 8, 56, 70, 3};
constexpr size_t kFrameObjectFrame = 24;  // PyFrameObject -> _PyInterpreterFrame* (3.11-3.13)

struct Calibration {
    bool ok = false;
    Layout layout{};
    size_t code_adaptive = 0;  // PyCodeObject -> first code unit
    size_t code_name = 0, code_filename = 0;
    size_t code_linetable = 0;                     // PyCodeObject -> co_linetable (a bytes object)
    size_t bytes_size = 16;                        // PyBytesObject -> ob_size
    size_t bytes_data = 32;                        // PyBytesObject -> ob_sval
    size_t str_data = 0;                           // compact ASCII str -> characters
    size_t str_state = 32;                         // PyASCIIObject -> state bits
    void* (*get_tstate)() = nullptr;               // PyGILState_GetThisThreadState
    int (*addr2line)(const void*, int) = nullptr;  // PyCode_Addr2Line
    int (*get_lasti)(PyFrameObject*) = nullptr;    // PyFrame_GetLasti
    const void* code_type = nullptr;               // &PyCode_Type: a frame whose executable is not code is skipped
};
Calibration g_cal;

template <typename T>
T load(const void* base, size_t offset) {
    T v;
    std::memcpy(&v, static_cast<const char*>(base) + offset, sizeof(T));
    return v;
}

int raw_walk(const Layout& l, void* tstate, RawFrame* out, int max, size_t code_adaptive) {
    if (!tstate) return 0;
    const void* f = load<const void*>(tstate, l.tstate_cframe);
    if (l.cframe_current_frame != kDirect) {
        if (!f) return 0;
        f = load<const void*>(f, l.cframe_current_frame);  // f was the _PyCFrame
    }
    int n = 0;
    while (f && n < max) {
        char owner = load<char>(f, l.frame_owner);
        const void* code = load<const void*>(f, l.frame_code);
        if ((l.owner_cstack < 0 || owner != l.owner_cstack) && code &&
            load<const void*>(code, sizeof(void*)) == g_cal.code_type) {
            auto instr = load<const char*>(f, l.frame_instr);
            long lasti = instr - (static_cast<const char*>(code) + code_adaptive);
            out[n++] = RawFrame{code, lasti < 0 ? 0 : static_cast<int>(lasti)};
        }
        f = load<const void*>(f, l.frame_previous);
    }
    return n;
}

/// Offset, within the first `span` bytes of obj, of a pointer-sized field equal to `value`.
size_t find_pointer(const void* obj, const void* value, size_t span) {
    for (size_t off = 16; off + sizeof(void*) <= span; off += sizeof(void*)) {
        if (load<const void*>(obj, off) == value) return off;
    }
    return 0;
}

std::string_view view_ascii(const void* str) noexcept {
    if (!str) return "?";
    auto state = load<uint32_t>(str, g_cal.str_state);
    bool compact_ascii = ((state >> 5) & 3u) == 3u;
    auto length = load<int64_t>(str, 16);
    if (!compact_ascii || length < 0 || length > 4096) return "?";
    return std::string_view(static_cast<const char*>(str) + g_cal.str_data, static_cast<size_t>(length));
}

std::string read_ascii(const void* str) { return std::string(view_ascii(str)); }

std::string_view view_bytes(const void* bytes) noexcept {
    if (!bytes) return {};
    auto length = load<int64_t>(bytes, g_cal.bytes_size);
    if (length <= 0) return {};
    return std::string_view(static_cast<const char*>(bytes) + g_cal.bytes_data, static_cast<size_t>(length));
}

bool calibrate_strings(PyObject* code) {
    const CApi* a = capi();
    Ref name(a->PyObject_GetAttrString(code, "co_name"));
    Ref file(a->PyObject_GetAttrString(code, "co_filename"));
    if (!name || !file) return false;
    g_cal.code_name = find_pointer(code, name.get(), 256);
    g_cal.code_filename = find_pointer(code, file.get(), 256);
    const char* utf8 = a->PyUnicode_AsUTF8(file.get());
    if (!g_cal.code_name || !g_cal.code_filename || !utf8 || !*utf8) return false;
    size_t len = std::strlen(utf8);
    for (size_t off = 24; off <= 80; off += 8) {
        if (std::memcmp(static_cast<const char*>(static_cast<const void*>(file.get())) + off, utf8, len) == 0) {
            g_cal.str_data = off;
            break;
        }
    }
    if (!g_cal.str_data) return false;
    // The compact/ascii bits must be set for this ASCII string and clear for a non-ASCII one.
    Ref non_ascii(a->PyUnicode_FromString("\xc3\xa9t\xc3\xa9"));
    if (!non_ascii) return false;
    return read_ascii(file.get()) == utf8 && read_ascii(non_ascii.get()) == "?";
}

/// co_linetable's offset and the bytes layout, checked against PyBytes_Size / PyBytes_AsString.
/// (A code object's exception table may be the same empty bytes object: the line table of the
/// calibrating frame, which has lines, is not.)
bool calibrate_linetable(PyObject* code) {
    auto size = reinterpret_cast<ptrdiff_t (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyBytes_Size"));
    auto data = reinterpret_cast<char* (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyBytes_AsString"));
    if (!size || !data) return false;
    Ref table(capi()->PyObject_GetAttrString(code, "co_linetable"));
    if (!table) return false;
    ptrdiff_t n = size(table.get());
    g_cal.code_linetable = find_pointer(code, table.get(), 256);
    if (!g_cal.code_linetable || n <= 0) return false;
    std::string_view v = view_bytes(table.get());
    if (v.size() != static_cast<size_t>(n) || v.data() != data(table.get())) return false;
    // code_view() reads co_firstlineno as PyCode_Addr2Line(code, -1).
    Ref first(capi()->PyObject_GetAttrString(code, "co_firstlineno"));
    return first && capi()->PyLong_AsLong(first.get()) == g_cal.addr2line(code, -1);
}

}  // namespace

bool calibrate_frames() {
    const CApi* a = capi();
    g_cal = Calibration{};
    if (a->minor < 11 || a->minor > 13) return false;
    g_cal.layout = a->minor == 11 ? kLayout311 : a->minor == 12 ? kLayout312 : kLayout313;
    g_cal.get_tstate = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
    g_cal.addr2line = reinterpret_cast<int (*)(const void*, int)>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
    g_cal.get_lasti = reinterpret_cast<int (*)(PyFrameObject*)>(dlsym(RTLD_DEFAULT, "PyFrame_GetLasti"));
    g_cal.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    if (!g_cal.get_tstate || !g_cal.addr2line || !g_cal.get_lasti || !g_cal.code_type) return false;
    if (g_cal.layout.cframe_current_frame == kDirect) {
        // The thread state's current-frame field: where the running frame object's own
        // interpreter frame is (checked by the walk below like every other offset).
        PyFrameObject* top = a->PyEval_GetFrame();  // borrowed
        void* tstate = g_cal.get_tstate();
        if (!top || !tstate) return false;
        const void* iframe = load<const void*>(top, kFrameObjectFrame);
        g_cal.layout.tstate_cframe = iframe ? find_pointer(tstate, iframe, 512) : 0;
        if (!g_cal.layout.tstate_cframe) return false;
    }

    // The public view of this thread's stack (GIL held): code objects and byte offsets.
    std::vector<std::pair<const void*, int>> expected;
    PyFrameObject* f = a->PyEval_GetFrame();
    if (f) a->Py_IncRef(reinterpret_cast<PyObject*>(f));
    while (f && expected.size() < 256) {
        Ref code(reinterpret_cast<PyObject*>(a->PyFrame_GetCode(f)));
        expected.emplace_back(code.get(), g_cal.get_lasti(f));
        PyFrameObject* back = a->PyFrame_GetBack(f);
        a->Py_DecRef(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    if (f) a->Py_DecRef(reinterpret_cast<PyObject*>(f));
    if (expected.empty()) return false;

    // Walk with the layout, first without the code-unit offset to derive it from the top frame.
    RawFrame raw[256];
    int n = raw_walk(g_cal.layout, g_cal.get_tstate(), raw, 256, 0);
    if (n != static_cast<int>(expected.size())) return false;
    g_cal.code_adaptive = static_cast<size_t>(raw[0].lasti - expected[0].second);
    if (g_cal.code_adaptive == 0 || g_cal.code_adaptive > 1024) return false;
    n = raw_walk(g_cal.layout, g_cal.get_tstate(), raw, 256, g_cal.code_adaptive);
    for (int i = 0; i < n; ++i) {
        if (raw[i].code != expected[static_cast<size_t>(i)].first) return false;
        if (raw[i].lasti != expected[static_cast<size_t>(i)].second) return false;
    }
    if (!calibrate_strings(static_cast<PyObject*>(const_cast<void*>(expected[0].first)))) return false;
    if (!calibrate_linetable(static_cast<PyObject*>(const_cast<void*>(expected[0].first)))) return false;
    g_cal.ok = true;
    return true;
}

bool frames_calibrated() noexcept { return g_cal.ok; }

int walk_frames(RawFrame* out, int max) noexcept {
    if (!g_cal.ok) return 0;
    return raw_walk(g_cal.layout, g_cal.get_tstate(), out, max, g_cal.code_adaptive);
}

int code_line(const void* code, int lasti) { return g_cal.addr2line(code, lasti); }
CodeView code_view(const void* code) noexcept {
    return CodeView{view_ascii(load<const void*>(code, g_cal.code_name)),
                    view_ascii(load<const void*>(code, g_cal.code_filename)),
                    view_bytes(load<const void*>(code, g_cal.code_linetable)),
                    g_cal.addr2line(code, -1)};  // a negative offset gives co_firstlineno
}

}  // namespace memguard::python

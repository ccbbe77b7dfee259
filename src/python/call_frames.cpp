#include "python/call_frames.h"

#include <cstring>
#include <vector>

#include "python/capi.h"

namespace memguard::python {
namespace {

enum class FrameRole { Other, ConvertFrame, AotRuntime };

/// dynamo's frame callback (torch/_dynamo/convert_frame.py) or AOTAutograd's runtime wrappers
/// (torch/_functorch/_aot_autograd/, where a lazy backward compile starts).
FrameRole frame_role(PyFrameObject* f) {
    const CApi* a = capi();
    Ref code(reinterpret_cast<PyObject*>(a->PyFrame_GetCode(f)));
    Ref name(code ? a->PyObject_GetAttrString(code.get(), "co_filename") : nullptr);
    const char* s = name ? a->PyUnicode_AsUTF8(name.get()) : nullptr;
    if (!s) {
        a->PyErr_Clear();
        return FrameRole::Other;
    }
    size_t n = std::strlen(s);
    static constexpr char kConvert[] = "_dynamo/convert_frame.py";
    if (n >= sizeof(kConvert) - 1 && std::strcmp(s + n - (sizeof(kConvert) - 1), kConvert) == 0) {
        return FrameRole::ConvertFrame;
    }
    return std::strstr(s, "_functorch/_aot_autograd/") ? FrameRole::AotRuntime : FrameRole::Other;
}

// The opcodes a frame that returns stops at, from the interpreter's own `opcode.opmap`; unknown
// (not needed) on versions other than 3.12. GIL-protected (written once at start-up).
struct ExitOpcodes {
    long return_value = -1, return_const = -1;
    bool known() const { return return_value >= 0; }
};
ExitOpcodes g_exit_ops;

/// Whether a frame whose exit was reported with a value returned rather than let an exception
/// through. Only where g_exit_ops are known (3.12).
bool left_normally(PyFrameObject* frame) {
    const CApi* a = capi();
    const int lasti = a->PyFrame_GetLasti(frame);  // bytes into co_code
    if (lasti < 0) return false;
    Ref code(reinterpret_cast<PyObject*>(a->PyFrame_GetCode(frame)));
    Ref bytes(code ? a->PyCode_GetCode(reinterpret_cast<PyCodeObject*>(code.get())) : nullptr);
    const char* p = bytes ? a->PyBytes_AsString(bytes.get()) : nullptr;
    if (!p || lasti >= a->PyBytes_Size(bytes.get())) {
        a->PyErr_Clear();
        return false;  // unknown: the mark waits for a return that says what it is
    }
    const long op = static_cast<unsigned char>(p[lasti]);
    return op == g_exit_ops.return_value || op == g_exit_ops.return_const;
}

}  // namespace

CallSite locate_compiling_call() {
    const CApi* a = capi();
    std::vector<FrameRole> roles;  // top first
    PyFrameObject* f = a->PyEval_GetFrame();
    if (f) a->Py_IncRef(reinterpret_cast<PyObject*>(f));
    while (f) {
        roles.push_back(frame_role(f));
        PyFrameObject* back = a->PyFrame_GetBack(f);
        a->Py_DecRef(reinterpret_cast<PyObject*>(f));
        f = back;
    }
    int depth = static_cast<int>(roles.size());  // the top frame's depth (bottom frame: 1)
    int convert_boundary = -1, aot_boundary = -1;
    for (int i = depth - 1; i >= 0; --i) {  // from the bottom up
        int frame_depth = depth - i;
        FrameRole role = roles[static_cast<size_t>(i)];
        if (role == FrameRole::ConvertFrame && convert_boundary < 0) convert_boundary = frame_depth - 1;
        if (role == FrameRole::AotRuntime && aot_boundary < 0) aot_boundary = frame_depth;
    }
    return CallSite{depth, convert_boundary >= 0 ? convert_boundary : aot_boundary};
}

void learn_exit_opcodes() {
    const CApi* a = capi();
    if (a->minor != 12 || !a->PyFrame_GetLasti || !a->PyCode_GetCode || !a->PyBytes_AsString || !a->PyBytes_Size)
        return;
    Ref opcode(a->PyImport_ImportModule("opcode"));
    Ref opmap(opcode ? a->PyObject_GetAttrString(opcode.get(), "opmap") : nullptr);
    auto op = [&](const char* name) -> long {
        PyObject* v = opmap ? a->PyDict_GetItemString(opmap.get(), name) : nullptr;  // borrowed
        return v ? a->PyLong_AsLong(v) : -1;
    };
    g_exit_ops.return_value = op("RETURN_VALUE");
    g_exit_ops.return_const = op("RETURN_CONST");
    a->PyErr_Clear();
}

bool stopped_at_raise(PyFrameObject* frame) { return g_exit_ops.known() && !left_normally(frame); }

}  // namespace memguard::python

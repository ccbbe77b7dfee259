#include "python/compile_window.h"

#include "common/log.h"
#include "python/capi.h"
#include "track/clock.h"

namespace memguard::python {
namespace {

// GIL-protected.
struct Freeze {
    bool active = false;
    int64_t since = 0;
    long baseline = -1;             // gc.get_freeze_count() when the hook started; -1: unknown (then only 0 opens)
    PyObject* gc_freeze = nullptr;  // strong references, kept for the life of the process
    PyObject* gc_unfreeze = nullptr;
    PyObject* gc_freeze_count = nullptr;
    static constexpr int64_t kMaxNs = 30LL * 1000000000LL;  // safety net: thaw a forgotten window
};
Freeze g_freeze;

bool call_ok(PyObject* fn) {
    if (!fn) return false;
    Ref r(capi()->PyObject_CallObject(fn, nullptr));
    if (!r) capi()->PyErr_Clear();
    return static_cast<bool>(r);
}

}  // namespace

void start_compile_window(PyObject* gc) {
    const CApi* a = capi();
    g_freeze.gc_freeze = a->PyObject_GetAttrString(gc, "freeze");
    g_freeze.gc_unfreeze = a->PyObject_GetAttrString(gc, "unfreeze");
    g_freeze.gc_freeze_count = a->PyObject_GetAttrString(gc, "get_freeze_count");
    if (g_freeze.gc_freeze_count) {
        Ref count(a->PyObject_CallObject(g_freeze.gc_freeze_count, nullptr));
        g_freeze.baseline = count ? a->PyLong_AsLong(count.get()) : -1;
    }
    a->PyErr_Clear();
}

void open_compile_window(int threads_with_marks) {
    const CApi* a = capi();
    if (g_freeze.active || threads_with_marks > 0 || !g_freeze.gc_freeze_count) return;
    Ref count(a->PyObject_CallObject(g_freeze.gc_freeze_count, nullptr));
    long n = count ? a->PyLong_AsLong(count.get()) : -1;
    if (!compile_window_may_open(n, g_freeze.baseline)) {
        // The program froze objects itself (or the call failed): leave its freeze alone.
        a->PyErr_Clear();
        MG_LOG_DEBUG("compile window: {} objects are frozen (the interpreter froze {} before the program ran); "
                     "the collection will scan every object",
                     n, g_freeze.baseline);
        return;
    }
    if (call_ok(g_freeze.gc_freeze)) {
        g_freeze.active = true;
        g_freeze.since = track::monotonic_ns();
        MG_LOG_DEBUG("compile window opened: older objects frozen until the compile's garbage is collected");
    }
}

void close_compile_window() {
    if (!g_freeze.active) return;
    g_freeze.active = false;
    call_ok(g_freeze.gc_unfreeze);
}

void close_forgotten_compile_window(int64_t now_ns) {
    if (g_freeze.active && now_ns - g_freeze.since > Freeze::kMaxNs) close_compile_window();
}

}  // namespace memguard::python

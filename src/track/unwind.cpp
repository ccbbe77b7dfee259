#include "track/unwind.h"

#if MEMGUARD_USE_LIBUNWIND
#include <libunwind.h>
#else
#include <unwind.h>
#endif

namespace memguard::track {

#if MEMGUARD_USE_LIBUNWIND

__attribute__((noinline)) int capture_stack(uintptr_t* ips, int max) noexcept {
    if (max <= 0) return 0;
    // unw_backtrace's first entry is this function; drop it.
    void* raw[300];
    int want = max + 1 < 300 ? max + 1 : 300;
    int n = unw_backtrace(raw, want);
    if (n <= 1) return 0;
    for (int i = 1; i < n; ++i) ips[i - 1] = reinterpret_cast<uintptr_t>(raw[i]);
    return n - 1;
}

const char* unwinder_name() noexcept { return "libunwind"; }

#else

namespace {
struct State {
    uintptr_t* ips;
    int max;
    int n;
    int skip;
};

_Unwind_Reason_Code on_frame(struct _Unwind_Context* ctx, void* arg) {
    auto* s = static_cast<State*>(arg);
    uintptr_t ip = _Unwind_GetIP(ctx);
    if (ip == 0) return _URC_END_OF_STACK;
    if (s->skip > 0) {
        --s->skip;
        return _URC_NO_REASON;
    }
    if (s->n >= s->max) return _URC_END_OF_STACK;
    s->ips[s->n++] = ip;
    return _URC_NO_REASON;
}
}  // namespace

__attribute__((noinline)) int capture_stack(uintptr_t* ips, int max) noexcept {
    if (max <= 0) return 0;
    State s{ips, max, 0, 1};
    _Unwind_Backtrace(on_frame, &s);
    return s.n;
}

const char* unwinder_name() noexcept { return "libgcc"; }

#endif

}  // namespace memguard::track

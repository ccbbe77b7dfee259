#include "track/unwind.h"

#if MEMGUARD_USE_LIBUNWIND
#include <libunwind.h>
#endif
#include <dlfcn.h>
#include <unwind.h>

#include <atomic>
#include <cstring>
#include <sched.h>

namespace memguard::track {

namespace {

// The fork gate (unwind.h): threads inside NativeUnwinder::capture, and whether a fork is waiting for them.
std::atomic<int> g_unwinding{0};
std::atomic<bool> g_fork_pending{false};

/// Held while a thread unwinds. Entering waits while a fork is pending (forks are rare and short).
/// Entering (count up, then look at the flag) and NativeUnwinder::before_fork (raise the flag, then
/// look at the count) are each a store followed by a load of the other variable: only sequential
/// consistency on all four keeps both sides from missing each other (on x86 the increment is a
/// locked instruction either way, and the loads are plain ones).
class UnwindGate {
public:
    UnwindGate() noexcept {
        for (;;) {
            g_unwinding.fetch_add(1, std::memory_order_seq_cst);
            if (!g_fork_pending.load(std::memory_order_seq_cst)) return;
            g_unwinding.fetch_sub(1, std::memory_order_acq_rel);
            while (g_fork_pending.load(std::memory_order_acquire)) sched_yield();
        }
    }
    ~UnwindGate() { g_unwinding.fetch_sub(1, std::memory_order_release); }
    UnwindGate(const UnwindGate&) = delete;
    UnwindGate& operator=(const UnwindGate&) = delete;
};

}  // namespace

NativeUnwinder::NativeUnwinder() : own_code_(object_range_of(reinterpret_cast<const void*>(&object_range_of))) {}

void NativeUnwinder::before_fork() noexcept {
    g_fork_pending.store(true, std::memory_order_seq_cst);
    while (g_unwinding.load(std::memory_order_seq_cst) != 0) sched_yield();
}

void NativeUnwinder::after_fork() noexcept {
    // In the child only the forking thread exists, and it was not unwinding: the count is 0.
    g_unwinding.store(0, std::memory_order_relaxed);
    g_fork_pending.store(false, std::memory_order_release);
}

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

/// libgcc's unwinder; `skip` frames of memguard's own are dropped.
__attribute__((always_inline)) inline int libgcc_backtrace(uintptr_t* ips, int max, int skip) noexcept {
    State s{ips, max, 0, skip};
    _Unwind_Backtrace(on_frame, &s);
    return s.n;
}

#if MEMGUARD_USE_LIBUNWIND
/// Whether something other than the C library defines pthread_mutex_lock: ThreadSanitizer's runtime
/// (libtsan.so, or linked into the program by clang or -static-libtsan) or another race detector's.
/// libunwind's fast path keeps a per-thread cache whose destructor runs in the last round of the
/// exiting thread's thread-specific data destructors and takes a mutex; ThreadSanitizer finishes the
/// thread in that same round, earlier, and its pthread_mutex_lock then crashes on the dead thread's
/// state (every thread of a TSan program that allocated CUDA memory crashed at exit). Such processes
/// get libgcc's unwinder, which keeps no per-thread state. Decided once, when the library loads.
bool mutex_lock_interposed() noexcept {
    void* lock = dlsym(RTLD_DEFAULT, "pthread_mutex_lock");
    void* libc = dlsym(RTLD_DEFAULT, "gnu_get_libc_version");
    Dl_info lock_info{}, libc_info{};
    if (!lock || !libc || !dladdr(lock, &lock_info) || !dladdr(libc, &libc_info)) return false;
    if (lock_info.dli_fbase == libc_info.dli_fbase) return false;
    // glibc before 2.34: libpthread's own definition.
    return !(lock_info.dli_fname && std::strstr(lock_info.dli_fname, "/libpthread.so"));
}

const bool g_use_libgcc = mutex_lock_interposed();
#endif

}  // namespace

#if MEMGUARD_USE_LIBUNWIND

__attribute__((noinline)) int NativeUnwinder::capture(uintptr_t* ips, int max) noexcept {
    if (max <= 0) return 0;
    UnwindGate gate;
    if (__builtin_expect(g_use_libgcc, 0)) return libgcc_backtrace(ips, max, 1);
    // unw_backtrace's first entry is this function; drop it.
    void* raw[300];
    int want = max + 1 < 300 ? max + 1 : 300;
    int n = unw_backtrace(raw, want);
    if (n <= 1) return 0;
    for (int i = 1; i < n; ++i) ips[i - 1] = reinterpret_cast<uintptr_t>(raw[i]);
    return n - 1;
}

__attribute__((noinline)) int NativeUnwinder::capture_with_slots(uintptr_t* ips, uintptr_t* slots, int capacity,
                                                                 int max, const TextRange* stop) noexcept {
    if (max <= 0 || capacity <= 0) return 0;
    UnwindGate gate;
    if (__builtin_expect(g_use_libgcc, 0)) return -1;
    // libunwind's cursor, frame by frame (its slower path): unw_backtrace's fast trace does not
    // say where it read each return address. The cursor starts at this function; its callers'
    // instruction pointers are the return addresses unw_backtrace reports.
    unw_context_t uc;
    unw_cursor_t cursor;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0) return -1;
    int n = 0, own = 0;
    while (n < capacity && n - own < max && unw_step(&cursor) > 0) {
        unw_word_t ip = 0, sp = 0;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp) < 0) break;
        // A caller's stack pointer is just above the return address its call pushed.
        uintptr_t slot = static_cast<uintptr_t>(sp) - sizeof(uintptr_t);
        ips[n] = static_cast<uintptr_t>(ip);
        slots[n] = unw_is_signal_frame(&cursor) <= 0 && *reinterpret_cast<const uintptr_t*>(slot) == ips[n] ? slot : 0;
        if (n == own && own_code_.contains(ips[n])) ++own;
        bool last = n >= own && stop && stop->contains(ips[n]);
        ++n;
        if (last) break;
    }
    return n;
}

const char* NativeUnwinder::name() const noexcept { return g_use_libgcc ? "libgcc" : "libunwind"; }

#else

__attribute__((noinline)) int NativeUnwinder::capture(uintptr_t* ips, int max) noexcept {
    if (max <= 0) return 0;
    UnwindGate gate;
    return libgcc_backtrace(ips, max, 1);
}

const char* NativeUnwinder::name() const noexcept { return "libgcc"; }

#endif

}  // namespace memguard::track

// Native backtraces: raw return addresses only, symbolized offline by the CLI. The recorder gets
// its unwinder injected (Unwinder); NativeUnwinder is the real one, testing/fake_unwinder.h the
// tests'. With MEMGUARD_USE_LIBUNWIND the nongnu libunwind's unw_backtrace (fast trace cache) is
// used; otherwise libgcc's _Unwind_Backtrace. docs/unwinding.md explains the choice.
#pragma once

#include <cstdint>

#include "track/modules.h"

namespace memguard::track {

/// Captures the calling thread's native stack. Thread safety: capture() from any thread; the
/// fork pair from the fork handlers.
class Unwinder {
public:
    virtual ~Unwinder() = default;
    /// Fills `ips` (innermost first) with up to `max` return addresses of the calling thread,
    /// starting at the caller of capture(). Returns how many were written.
    virtual int capture(uintptr_t* ips, int max) noexcept = 0;
    /// Like capture(), and for each frame the stack address its return address was read from:
    /// `*slots[i] == ips[i]` when the stack is unwound, or `slots[i]` 0 where that does not hold
    /// (a signal frame). For StackMemo, which checks those slots instead of unwinding again.
    /// Stops after `max` frames beyond the leading ones in own_code() (at most `capacity` in
    /// all), or after the first of them inside `stop` (when not null). -1 when this unwinder
    /// cannot say.
    virtual int capture_with_slots(uintptr_t* /*ips*/, uintptr_t* /*slots*/, int /*capacity*/, int /*max*/,
                                   const TextRange* /*stop*/) noexcept {
        return -1;
    }
    /// The code of the caller's own frames on top of every stack (memguard's), which the
    /// recorder drops; empty when there is none to drop.
    virtual TextRange own_code() const noexcept = 0;
    /// The header's `unwinder` ("libunwind", "libgcc").
    virtual const char* name() const noexcept = 0;
    /// fork(2): an unwinder may take locks of its own (libunwind's global lock, the loader's),
    /// which a fork while another thread unwinds would copy held into the child, hanging its first
    /// stack. before_fork waits until no thread is inside capture() and keeps new ones out until
    /// after_fork (parent and child). Called by the recorder's fork handlers after they took every
    /// other lock: no thread holds a memguard lock while it unwinds.
    virtual void before_fork() noexcept = 0;
    virtual void after_fork() noexcept = 0;
};

/// The process's unwinder (libunwind or libgcc, chosen once when the library loads). Its own
/// code is the object it is linked into (libmemguard.so).
class NativeUnwinder final : public Unwinder {
public:
    NativeUnwinder();
    int capture(uintptr_t* ips, int max) noexcept override;
    int capture_with_slots(uintptr_t* ips, uintptr_t* slots, int capacity, int max,
                           const TextRange* stop) noexcept override;
    TextRange own_code() const noexcept override { return own_code_; }
    const char* name() const noexcept override;
    void before_fork() noexcept override;
    void after_fork() noexcept override;

private:
    TextRange own_code_;
};

}  // namespace memguard::track

// Native backtraces: raw return addresses only, symbolized offline by the CLI.
// With MEMGUARD_USE_LIBUNWIND the nongnu libunwind's unw_backtrace (fast trace cache) is used;
// otherwise libgcc's _Unwind_Backtrace. docs/unwinding.md explains the choice.
#pragma once

#include <cstdint>

namespace memguard::track {

/// Fills `ips` (innermost first) with up to `max` return addresses of the calling thread,
/// starting at the caller of capture_stack. Returns how many were written.
int capture_stack(uintptr_t* ips, int max) noexcept;

/// Name of the unwinder compiled in ("libunwind" or "libgcc").
const char* unwinder_name() noexcept;

/// fork(2): the unwinders take locks of their own (libunwind's global lock, the loader's), which a
/// fork while another thread unwinds would copy held into the child, hanging its first stack.
/// Waits until no thread is inside capture_stack and keeps new ones out until
/// allow_unwinding_after_fork() (parent and child). Called by the recorder's fork handlers after
/// they took every other lock: no thread holds a memguard lock while it unwinds.
void block_unwinding_for_fork() noexcept;
void allow_unwinding_after_fork() noexcept;

}  // namespace memguard::track

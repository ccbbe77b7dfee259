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

}  // namespace memguard::track

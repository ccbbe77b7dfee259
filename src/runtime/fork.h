// fork(2): every lock of the library is taken before fork and released after it, by one handler
// per fork phase, in the documented lock order (docs/architecture.md, "Ordering and locks"):
//
//   1. allocator mode's device locks (a free appends its t record under its device lock)
//   2. the virtual-memory order lock (the freeing side records while it holds it)
//   3. the Python stack tables (a thread recording a Python stack holds its lock while it takes the
//      writer's)
//   4. the recorder's locks, and last its unwinder gate (Recorder::before_fork)
//
// and released in the reverse order, in the parent and in the child alike. One registration
// replaces the handlers each part used to register itself, whose order depended on the order of
// registration (prepare handlers run in the reverse order).
#pragma once

#include <mutex>

namespace memguard::runtime {

/// Registers the fork handlers once (start-up). `recording`: the recorder is enabled (a disabled
/// recorder holds nothing to take).
void register_fork_handlers(bool recording) noexcept;

/// The driver hooks' virtual-memory order lock (interpose/driver_hooks.cpp says what it orders).
/// Kept here so that the fork handlers take it from the first fork on.
extern std::mutex g_vmm_order;
inline std::mutex& vmm_order_lock() noexcept { return g_vmm_order; }

}  // namespace memguard::runtime

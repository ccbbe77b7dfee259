// Library start-up and shutdown: configuration from the environment, fork handlers, the final
// flush at exit.
#pragma once

#include <atomic>

namespace memguard::interpose {

extern std::atomic<bool> g_initialized;
void initialize_once() noexcept;

/// Cheap on the hook path: one atomic load once initialized. Hooks can run before the library's
/// constructor (another preloaded library's constructor may allocate), so each hook calls this.
inline void ensure_initialized() noexcept {
    if (!g_initialized.load(std::memory_order_acquire)) initialize_once();
}

}  // namespace memguard::interpose

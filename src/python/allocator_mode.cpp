#include "python/allocator_mode.h"

#include <atomic>

namespace memguard::python {

namespace {

AllocatorSwitch g_switch;
std::atomic<bool> g_pending{false};
thread_local bool t_collecting = false;

}  // namespace

void set_allocator_switch(const AllocatorSwitch& sw) {
    g_switch = sw;
    g_pending.store(sw.ready && sw.install, std::memory_order_release);
}

bool allocator_install_pending() noexcept { return g_pending.load(std::memory_order_relaxed); }

void maybe_install_allocator() {
    if (!g_pending.load(std::memory_order_acquire) || !g_switch.ready()) return;
    // Cleared before the switch runs: it imports and calls into torch, which raises import events
    // of its own.
    g_pending.store(false, std::memory_order_release);
    g_switch.install();
}

bool collecting_on_this_thread() noexcept { return t_collecting; }
void set_collecting_on_this_thread(bool collecting) noexcept { t_collecting = collecting; }

}  // namespace memguard::python

// The Python hook's side of allocator mode (MEMGUARD_ALLOCATOR=memguard): what hook.cpp calls, so
// that the Python hook needs nothing from allocator mode's room (src/allocmode) above it.
//
// - The switch to memguard's allocator must run on the first "import" audit event after
//   torch.cuda.memory has finished loading (allocmode/torch_bridge.h says why). Allocator mode
//   hands its two steps down at start-up; the audit hook asks on every import event.
// - Frees made while a garbage collection runs are marked as the collector's (the `t` record's
//   flag); the gc callback keeps the thread's flag, the allocator reads it.
#pragma once

namespace memguard::python {

/// Allocator mode's switch: `ready` says whether torch has loaded far enough (GIL held); then
/// `install` runs once.
struct AllocatorSwitch {
    bool (*ready)() = nullptr;
    void (*install)() = nullptr;
};

/// Called once from start-up, before install(), when MEMGUARD_ALLOCATOR=memguard.
void set_allocator_switch(const AllocatorSwitch& sw);

/// True while the switch waits for torch (the audit hook asks on every import event).
bool allocator_install_pending() noexcept;

/// On an import event (GIL held): runs the switch once torch is ready for it.
void maybe_install_allocator();

/// True while a garbage collection runs on the calling thread (kept by the gc callback).
bool collecting_on_this_thread() noexcept;
void set_collecting_on_this_thread(bool collecting) noexcept;

}  // namespace memguard::python

// The process-global, as the library's entry points reach it: the exported CUDA hooks
// (src/interpose), allocator mode's exports (allocmode/api.cpp), the C API and NVTX.
//
// Both functions are inline and cost nothing beyond what they return: one atomic load once the
// library is initialized, and a reference to an object that lives for the whole process (never
// destroyed: hooks run during process teardown).
#pragma once

#include <atomic>

#include "track/recorder.h"

namespace memguard::runtime {

extern std::atomic<bool> g_initialized;

/// The library's start-up (startup.cpp), run once: configuration, the recorder, fork handlers, the
/// Python hook, allocator mode's switch, the NVTX injection.
void initialize_once() noexcept;

/// Cheap on the hook path: one atomic load once initialized. Hooks can run before the library's
/// constructor (another preloaded library's constructor may allocate), so each hook calls this.
inline void ensure_initialized() noexcept {
    if (!g_initialized.load(std::memory_order_acquire)) initialize_once();
}

/// The process's recorder: every record goes through it.
inline track::Recorder& recorder() noexcept { return track::Recorder::instance(); }

}  // namespace memguard::runtime

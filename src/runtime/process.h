// The process-global, as the library's entry points reach it: the exported CUDA hooks
// (src/interpose), allocator mode's exports (allocmode/api.cpp), the C API and NVTX.
//
// On the hook path: ensure_initialized() is one atomic load once the library is initialized;
// recorder() one call and a function-local static's guard (as the recorder's singleton was), and
// it returns an object that lives for the whole process (never destroyed: hooks run during process
// teardown).
#pragma once

#include <atomic>

#include "track/recorder.h"
#include "track/system_clock.h"
#include "track/unwind.h"
#include "track/writer.h"

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

/// The one process-global: the recorder over the report file, the system clock and the native
/// unwinder. Tests build their own recorders over fakes (track/testing); nothing in src/ below
/// runtime/ reaches this object except through a reference handed down at start-up.
struct Process {
    Process();

    track::SystemClock clock;
    track::ReportWriter writer{clock};
    track::NativeUnwinder unwinder;
    track::Recorder recorder;  // last: it holds references to the three above
};

/// The process's one Process, made on first use and never destroyed.
Process& process() noexcept;

/// The process's recorder: every record goes through it.
inline track::Recorder& recorder() noexcept { return process().recorder; }

}  // namespace memguard::runtime

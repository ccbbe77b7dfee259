// The recorder as the library runs it: over the report file, the system clock and the native
// unwinder, all owned by one object that is never destroyed (hooks may run during process
// teardown). Recorder::instance() reaches it. This wiring belongs to the process-global (it
// moves to src/runtime/ when that exists); nothing else in src/track depends on it.
#pragma once

#include "track/recorder.h"
#include "track/system_clock.h"
#include "track/unwind.h"
#include "track/writer.h"

namespace memguard::track {

struct Production {
    Production();

    SystemClock clock;
    ReportWriter writer{clock};
    NativeUnwinder unwinder;
    Recorder recorder;  // last: it holds references to the three above
};

/// The process's one Production, made on first use.
Production& production();

}  // namespace memguard::track

#include "runtime/process.h"

namespace memguard::runtime {

namespace {

/// Off until init() applies the process's configuration.
Config off() {
    Config c;
    c.enabled = false;
    return c;
}

}  // namespace

Process::Process() : recorder(off(), writer, clock, unwinder) {}

// As the recorder's singleton was before: one call and the guard of a function-local static; the
// object is made on the first call (hooks can run before the library's constructor) and never
// destroyed (hooks run during process teardown).
Process& process() noexcept {
    static Process* p = new Process();
    return *p;
}

}  // namespace memguard::runtime

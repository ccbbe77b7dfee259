#include "track/production.h"

namespace memguard::track {

namespace {

/// Off until init() applies the process's configuration.
Config off() {
    Config c;
    c.enabled = false;
    return c;
}

}  // namespace

Production::Production() : recorder(off(), writer, clock, unwinder) {}

Production& production() {
    static Production* p = new Production();
    return *p;
}

// What every hook calls: as before the wiring moved here, one call and the guard of a function-local
// static; the object is made on the first call and never destroyed.
Recorder& Recorder::instance() {
    static Recorder* r = &production().recorder;
    return *r;
}

}  // namespace memguard::track

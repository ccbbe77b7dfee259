// What the Python hook's parts share: the interpreter's phase, and what install() was given.
#pragma once

#include <atomic>

#include "python/hook.h"

namespace memguard::track {
class Recorder;
}

namespace memguard::python {

enum class Phase : int { NotPython, WaitingForInit, Running, Finalizing };

extern std::atomic<Phase> g_phase;

/// True while Python code may run: initialized, not finalizing.
inline bool interpreter_running() noexcept { return g_phase.load(std::memory_order_acquire) == Phase::Running; }

/// What install() was given. Owned by hook.cpp: written once by install(), before the audit hook
/// exists (so before any other part of the hook can run), and only read after.
struct HookContext {
    HookSettings settings;
    track::Recorder* recorder = nullptr;
};
const HookContext& hook_context() noexcept;

/// The recorder that python/ reports to: the one place it is kept (given to install()).
inline track::Recorder& recorder() noexcept { return *hook_context().recorder; }
inline const HookSettings& settings() noexcept { return hook_context().settings; }

/// True once the hook must not run Python code any more: finalization began (or the interpreter
/// is not running). GIL held.
bool finalizing();

}  // namespace memguard::python

// Interpreter phase, shared by the Python hook's parts.
#pragma once

#include <atomic>

namespace memguard::python {

enum class Phase : int { NotPython, WaitingForInit, Running, Finalizing };

extern std::atomic<Phase> g_phase;

/// True while Python code may run: initialized, not finalizing.
inline bool interpreter_running() noexcept { return g_phase.load(std::memory_order_acquire) == Phase::Running; }

}  // namespace memguard::python

// Python allocation sites: the calling thread's Python stack, interned as p/P records.
#pragma once

#include <cstdint>

namespace memguard::python {

/// The recorder's Python stack provider: the calling thread's Python stack, interned (0 when
/// the thread does not hold the GIL or the interpreter is not running).
uint32_t capture_python_stack();

/// The stack tables' lock, held by a thread while it interns a stack and appends its records: taken
/// before fork(2) and released after it, in both processes.
void lock_stack_tables_for_fork() noexcept;
void unlock_stack_tables_after_fork() noexcept;

}  // namespace memguard::python

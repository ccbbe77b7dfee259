// Python allocation sites: the calling thread's Python stack, interned as p/P records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memguard::python {

/// The recorder's Python stack provider: the calling thread's Python stack, interned (0 when
/// the thread does not hold the GIL or the interpreter is not running).
uint32_t capture_python_stack();

/// A frame of an interned Python stack, as its p record says.
struct PythonFrameText {
    int line = 0;
    std::string name, filename;
};
/// The frames (innermost first) of interned Python stack `id`; false when the id is unknown (0,
/// or interned for an earlier report of a fork parent). Takes the stack tables' lock; not for the
/// hook path.
bool python_stack_frames(uint32_t id, std::vector<PythonFrameText>* out);

/// The stack tables' lock, held by a thread while it interns a stack and appends its records: taken
/// before fork(2) and released after it, in both processes.
void lock_stack_tables_for_fork() noexcept;
void unlock_stack_tables_after_fork() noexcept;

}  // namespace memguard::python

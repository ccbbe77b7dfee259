// A shared library with functions at known source lines, for the symbolizer tests. Each function
// records the return address of a call it makes, i.e. an instruction pointer as a stack records it.
#pragma once

#define SYMTEST_API __attribute__((visibility("default")))

namespace memguard_symtest {

/// Calls a recorder from a known line; returns the recorded return address (inside known_function).
SYMTEST_API void* known_function(int n);
/// The source line of that call.
SYMTEST_API int known_call_line();

/// Same, from a function with hidden visibility (in .symtab only, not in .dynsym).
SYMTEST_API void* call_hidden_function(int n);

/// Same, from code that an always_inline helper put into outer_function; the lines of the recorder
/// call (in the helper) and of the helper call (in outer_function).
SYMTEST_API void* outer_function(int n);
SYMTEST_API int inlined_call_line();
SYMTEST_API int outer_call_line();

}  // namespace memguard_symtest

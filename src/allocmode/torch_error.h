// Throwing PyTorch's own c10::OutOfMemoryError from allocator mode, without torch's headers or a
// link to libc10.
//
// PyTorch's Python binding (HANDLE_TH_ERRORS, torch/csrc/Exceptions.h) turns a caught
// `c10::OutOfMemoryError&` into torch.cuda.OutOfMemoryError, which training scripts catch; any other
// std::exception becomes a RuntimeError. Catching by reference then calling what() or the inline
// what_without_backtrace() needs an object with c10::Error's real layout, so the object is built
// by libc10's exported constructors: OutOfMemoryError's own where it exists (an out-of-line
// constructor in recent releases), else c10::Error's base-object constructor followed by storing
// OutOfMemoryError's vtable address point, which is what the compiler emits for the inheriting
// constructor of older releases (`using Error::Error;`, inline). The symbols are looked up by
// their cxx11-ABI names; a torch built with the old ABI, or none loaded, gets OutOfMemory below.
#pragma once

#include <cstddef>
#include <new>
#include <string>

namespace memguard::allocmode {

/// The exception thrown when PyTorch's error type cannot be built: a std::bad_alloc (which
/// PyTorch's binding reports as a RuntimeError) carrying the same message.
class OutOfMemory : public std::bad_alloc {
public:
    explicit OutOfMemory(std::string message) : message_(std::move(message)) {}
    const char* what() const noexcept override { return message_.c_str(); }

private:
    std::string message_;
};

/// What it takes to build and throw a c10::OutOfMemoryError, resolved from the process.
struct TorchOomSymbols {
    void* own_ctor = nullptr;   // c10::OutOfMemoryError(SourceLocation, std::string), complete object
    void* base_ctor = nullptr;  // c10::Error(SourceLocation, std::string), base object
    void* vtable = nullptr;     // c10::OutOfMemoryError's vtable (symbol start)
    void* type = nullptr;       // typeinfo for c10::OutOfMemoryError

    /// True when an object can be built: the typeinfo and one of the two ways to construct.
    bool usable() const { return type && (own_ctor || (base_ctor && vtable)); }
};

/// Mangled names (cxx11 libstdc++ ABI), exposed for tests and diagnostics.
extern const char* const kTorchOomOwnCtor;
extern const char* const kTorchErrorBaseCtor;
extern const char* const kTorchOomVtable;
extern const char* const kTorchOomTypeinfo;

/// Bytes allocated for the exception object. sizeof(c10::Error) is not known without torch's
/// headers (168 bytes in releases that kept the backtrace as a string, 128 in 2.13): the object
/// gets far more than any release needs. Extra bytes are never read: the runtime keeps the
/// exception where it was allocated (exception_ptr and rethrow share it), and a handler that
/// catches by value copies with c10's copy constructor, which knows the real size.
inline constexpr std::size_t kTorchErrorReserve = 1024;

/// Looks the symbols up with `lookup` (a name -> address function returning nullptr when absent).
TorchOomSymbols resolve_torch_oom(void* (*lookup)(const char* name));

/// Throws c10::OutOfMemoryError(message) when `syms` is usable, else OutOfMemory(message).
/// `use_own_ctor` false forces the base-constructor path (tests cover both on one torch).
[[noreturn]] void throw_torch_oom(const TorchOomSymbols& syms, const std::string& message, bool use_own_ctor = true);

}  // namespace memguard::allocmode

// Reading the calling thread's Python stack WITHOUT the GIL.
//
// PyTorch's operators release the GIL before they allocate, so a CUDA allocation hook almost never
// runs on a thread that holds it, and it must not take it (the caching allocator calls cudaMalloc
// under its own lock; a thread holding the GIL may be waiting for that lock to free a tensor). The
// thread's own Python frames cannot change while it runs C code below them, and each frame keeps
// its code object (and the code object its names and line table) alive, so they can be read
// directly, as sampling profilers do. The layouts are CPython internals: the walker knows those of
// 3.11, 3.12 and 3.13, and calibrate() checks them against the public API (with the GIL held) before
// they are ever used; on any mismatch, or on another version, it stays off and memguard records
// Python stacks only for threads that hold the GIL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memguard::python {

struct RawFrame {
    const void* code;  // PyCodeObject*, alive while the frame runs
    int lasti;         // byte offset of the last instruction, for PyCode_Addr2Line
};

/// With the GIL held, once: checks the layouts against the public API. Returns true when the
/// GIL-free walker may be used.
bool calibrate_frames();
bool frames_calibrated() noexcept;

/// The calling thread's Python frames, innermost first (up to max). Call only when
/// frames_calibrated(); works with or without the GIL. Returns 0 for threads without Python.
int walk_frames(RawFrame* out, int max) noexcept;

/// The line of a live code object's instruction at byte offset lasti (PyCode_Addr2Line: a linear
/// scan of its line table), read without the GIL.
int code_line(const void* code, int lasti);

/// Everything a frame's p record depends on besides lasti, viewed in place in a live code object:
/// the ASCII text of co_name and co_filename ("?" for any other string) and the two
/// inputs of PyCode_Addr2Line, co_firstlineno and the bytes of co_linetable (the line of an
/// instruction offset is a pure function of the three). Valid while the code object is alive.
struct CodeView {
    std::string_view name, filename, linetable;
    int firstlineno;
};
CodeView code_view(const void* code) noexcept;

}  // namespace memguard::python

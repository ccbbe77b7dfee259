// What the hooks report: allocation kinds and the CUDA functions (format/vocabulary.h), the stream a
// call names.
#pragma once

#include <cstdint>

#include "format/vocabulary.h"

namespace memguard::track {

// The vocabulary is the report format's (format/vocabulary.h).
using format::Api;
using format::api_name;
using format::is_gpu;
using format::Kind;
using format::kind_name;

/// Calls that CUDA forbids while a stream capture makes "potentially unsafe" calls illegal
/// (cudaStreamCaptureMode). Stream-ordered allocation is legal during capture.
inline bool is_potentially_unsafe(Api a) noexcept {
    return a != Api::cudaMallocAsync && a != Api::cudaFreeAsync && a != Api::cudaMallocFromPoolAsync &&
           a != Api::cuMemAllocAsync && a != Api::cuMemFreeAsync && a != Api::cuMemAllocFromPoolAsync;
}

/// The stream a call names, if any. Per-thread default streams (cudaStreamPerThread, or the null
/// stream in a _ptsz call) are a different stream in every thread: `per_thread` marks them, and
/// their handle is always cudaStreamPerThread's value.
struct StreamArg {
    bool present = false;
    uintptr_t handle = 0;
    bool per_thread = false;
};

constexpr uintptr_t kPerThreadStream = 0x2;  // cudaStreamPerThread

inline StreamArg make_stream_arg(uintptr_t handle, bool ptsz_call) noexcept {
    bool per_thread = handle == kPerThreadStream || (ptsz_call && handle == 0);
    return StreamArg{true, per_thread ? kPerThreadStream : handle, per_thread};
}

}  // namespace memguard::track

// What the hooks report: allocation kinds and the CUDA functions, with their report names.
#pragma once

#include <cstdint>

namespace memguard::track {

enum class Kind : uint8_t { Device, Async, Managed, Pinned };

inline const char* kind_name(Kind k) noexcept {
    switch (k) {
    case Kind::Device: return "device";
    case Kind::Async: return "async";
    case Kind::Managed: return "managed";
    case Kind::Pinned: return "pinned";
    }
    return "device";
}

inline bool is_gpu(Kind k) noexcept { return k != Kind::Pinned; }

/// CUDA functions whose calls are recorded. Names are the report's `api` field.
enum class Api : uint8_t {
    cudaMalloc,
    cudaFree,
    cudaMallocAsync,
    cudaFreeAsync,
    cudaMallocFromPoolAsync,
    cudaMallocManaged,
    cudaMallocPitch,
    cudaMallocHost,
    cudaHostAlloc,
    cudaFreeHost,
    // Driver API (docs/report-format.md, minor 3): the driver function's base name.
    cuMemAlloc,
    cuMemFree,
    cuMemAllocAsync,
    cuMemFreeAsync,
    cuMemAllocFromPoolAsync,
    cuMemAllocManaged,
    cuMemAllocPitch,
    cuMemHostAlloc,
    cuMemFreeHost,
    cuMemAllocHost,
};

inline const char* api_name(Api a) noexcept {
    switch (a) {
    case Api::cudaMalloc: return "cudaMalloc";
    case Api::cudaFree: return "cudaFree";
    case Api::cudaMallocAsync: return "cudaMallocAsync";
    case Api::cudaFreeAsync: return "cudaFreeAsync";
    case Api::cudaMallocFromPoolAsync: return "cudaMallocFromPoolAsync";
    case Api::cudaMallocManaged: return "cudaMallocManaged";
    case Api::cudaMallocPitch: return "cudaMallocPitch";
    case Api::cudaMallocHost: return "cudaMallocHost";
    case Api::cudaHostAlloc: return "cudaHostAlloc";
    case Api::cudaFreeHost: return "cudaFreeHost";
    case Api::cuMemAlloc: return "cuMemAlloc";
    case Api::cuMemFree: return "cuMemFree";
    case Api::cuMemAllocAsync: return "cuMemAllocAsync";
    case Api::cuMemFreeAsync: return "cuMemFreeAsync";
    case Api::cuMemAllocFromPoolAsync: return "cuMemAllocFromPoolAsync";
    case Api::cuMemAllocManaged: return "cuMemAllocManaged";
    case Api::cuMemAllocPitch: return "cuMemAllocPitch";
    case Api::cuMemHostAlloc: return "cuMemHostAlloc";
    case Api::cuMemFreeHost: return "cuMemFreeHost";
    case Api::cuMemAllocHost: return "cuMemAllocHost";
    }
    return "unknown";
}

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

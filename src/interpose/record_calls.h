// The body every allocating and freeing hook shares, runtime (cudaMalloc...) and driver
// (cuMemAlloc...) alike: the real call with the caller's exact arguments, its exact result, and
// the records around it. Both APIs report success as 0 (cudaSuccess, CUDA_SUCCESS), so one body
// serves both; what differs (how the current device is found, the type of the returned address)
// comes in as arguments.
//
// An allocation reached through several layers (cudaMalloc -> cuMemAlloc_v2) is recorded once, by
// the outermost hook (HookScope). Nothing here makes a CUDA call that is illegal during stream
// capture: the only extra call is the caller's `device` function, which reads thread state.
#pragma once

#include <cstdint>
#include <type_traits>

#include "interpose/hook_support.h"
#include "track/recorder.h"

namespace memguard::interpose {

/// What an allocating hook was asked for.
struct AllocCall {
    track::Api api;
    track::Kind kind;
    track::StreamArg stream;
    uint64_t requested;             // bytes asked for
    const size_t* pitch = nullptr;  // cudaMallocPitch/cuMemAllocPitch: the block is *pitch * rows bytes
    size_t rows = 1;

    /// The block's size; on failure the pitch is not set, so a failure reports the bytes asked for.
    uint64_t size(bool ok) const { return ok && pitch ? uint64_t{*pitch} * rows : requested; }
};

/// The address an allocation returned: a pointer (runtime, pinned) or a CUdeviceptr (driver).
template <typename P>
uintptr_t address_of(P p) {
    if constexpr (std::is_pointer_v<P>) {
        return reinterpret_cast<uintptr_t>(p);
    } else {
        return static_cast<uintptr_t>(p);
    }
}

/// After the E record of an allocation that failed with an out-of-memory error (2: both
/// cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY): its x record (oom_context.cpp).
void record_cuda_oom(track::Recorder& rec, track::Api api, uint64_t size, int device, const uintptr_t* ips, int n);

/// Runs `call` (the real allocation) and records its outcome. `out` is where the call stores the
/// address; `device()` is the current device (not asked for pinned memory).
template <typename Out, typename Call, typename Device>
auto allocate_and_record(const AllocCall& what, Out* out, Call&& call, Device&& device) -> decltype(call()) {
    using Result = decltype(call());
    ensure_initialized();
    track::HookScope scope;
    track::Recorder& rec = runtime::recorder();
    if (!scope.outermost() || !rec.active()) return call();
    if (track::is_potentially_unsafe(what.api) && what.requested > 0) {
        ErrnoKeeper keep_errno;
        rec.check_unsafe_call(what.api);
    }
    Result err = call();
    ErrnoKeeper keep_errno;
    const bool ok = err == Result{};
    const uintptr_t addr = ok && out ? address_of(*out) : 0;
    if (ok && addr == 0) return err;  // nothing allocated (zero bytes, or no out-parameter)
    uintptr_t ips[track::Recorder::kStackCapacity];
    int n = rec.capture_stack(ips);
    int dev = what.kind == track::Kind::Pinned ? -1 : device();
    if (ok) {
        rec.record_alloc(what.api, what.kind, addr, what.size(true), dev, what.stream, ips, n);
    } else {
        rec.record_alloc_failed(what.api, what.kind, what.size(false), dev, what.stream, ips, n, static_cast<int>(err));
        if (static_cast<int>(err) == 2 && what.kind != track::Kind::Pinned) {
            record_cuda_oom(rec, what.api, what.size(false), dev, ips, n);
        }
    }
    return err;
}

/// Records the free of `ptr`, then runs `call` (the real free); a failed free revives the block.
template <typename Call>
auto release_and_record(track::Api api, uintptr_t ptr, track::StreamArg stream, Call&& call) -> decltype(call()) {
    using Result = decltype(call());
    ensure_initialized();
    track::HookScope scope;
    track::Recorder& rec = runtime::recorder();
    if (!scope.outermost() || !rec.active() || ptr == 0) return call();
    auto block = [&] {
        ErrnoKeeper keep_errno;
        if (track::is_potentially_unsafe(api)) rec.check_unsafe_call(api);
        return rec.record_free(api, ptr, stream);
    }();
    Result err = call();
    if (err != Result{} && block) {
        ErrnoKeeper keep_errno;
        rec.record_free_failed(ptr, *block, static_cast<int>(err));
    }
    return err;
}

}  // namespace memguard::interpose

// The driver functions memguard wraps, one entry per variant (an ABI and a default-stream
// flavour of one driver function). tools/check-hooks.py reads this list: every variant must have
// a wrapper (MG_DRIVER_HOOK in driver_hooks.cpp), a forwarder (the exported function of the same
// name) and a test that reaches it.
//
// X(variant, family, min_version, per_thread)
//   variant      the exported libcuda symbol, and the name of our wrapper and forwarder
//   family       the name cuGetProcAddress is asked for (the symbol without _v2/_ptsz)
//   min_version  the CUDA version (cudaTypedefs.h: PFN_<family>_v<version>) from which
//                cuGetProcAddress(family, version, ...) returns this variant
//   per_thread   1 for the per-thread-default-stream variant (_ptsz), selected by
//                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
//
// Older ABIs of a family (cuMemAlloc with a 32-bit size before 3020, the one-argument
// cuStreamBeginCapture before 10010, the five-argument cuGraphInstantiate) are not listed: lookups
// that return them pass through untouched. The exception is cuMemAllocHost: its CUDA 2.0 ABI (a
// 32-bit size) still returns a real host pointer that cuMemFreeHost frees, so it is a block like
// any other and is wrapped too.
//
// cuda.h defines some families as macros for their current variant (cuMemAllocHost ->
// cuMemAllocHost_v2): a file that includes cuda.h and uses this table must #undef them.
#pragma once

#define MG_DRIVER_VARIANTS(X)                                                         \
    X(cuMemAlloc_v2, cuMemAlloc, 3020, 0)                                             \
    X(cuMemFree_v2, cuMemFree, 3020, 0)                                               \
    X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0)                                  \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0)                                   \
    X(cuMemHostAlloc, cuMemHostAlloc, 2020, 0)                                        \
    X(cuMemAllocHost, cuMemAllocHost, 2000, 0)                                        \
    X(cuMemAllocHost_v2, cuMemAllocHost, 3020, 0)                                     \
    X(cuMemFreeHost, cuMemFreeHost, 2000, 0)                                          \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)                                     \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 1)                                \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)                     \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 1)                \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)                                       \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 1)                                  \
    X(cuMemAddressReserve, cuMemAddressReserve, 10020, 0)                             \
    X(cuMemAddressFree, cuMemAddressFree, 10020, 0)                                   \
    X(cuMemCreate, cuMemCreate, 10020, 0)                                             \
    X(cuMemRelease, cuMemRelease, 10020, 0)                                           \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0)             \
    X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020, 0)       \
    X(cuMemMap, cuMemMap, 10020, 0)                                                   \
    X(cuMemUnmap, cuMemUnmap, 10020, 0)                                               \
    X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, 0)                        \
    X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, 1)                   \
    X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, 0)             \
    X(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 12030, 1)        \
    X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0)                               \
    X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, 1)                          \
    X(cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, 10010, 0) \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0)             \
    X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0)           \
    X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 1)      \
    X(cuGraphLaunch, cuGraphLaunch, 10000, 0)                                         \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1)                                    \
    X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0)                               \
    X(cuGraphDestroy, cuGraphDestroy, 10000, 0)                                       \
    X(cuGetProcAddress, cuGetProcAddress, 11030, 0)                                   \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0)

namespace memguard::interpose {

enum class Variant : int {
#define MG_VARIANT_ENUM(variant, family, min_version, per_thread) variant,
    MG_DRIVER_VARIANTS(MG_VARIANT_ENUM)
#undef MG_VARIANT_ENUM
        kCount
};

/// The variant whose exported libcuda name is `name` (a dlsym lookup); false when not covered.
bool variant_by_symbol(const char* name, Variant* out) noexcept;

/// The variant cuGetProcAddress(family, version, flags) returns, by the driver's rule: the entry of
/// `family` with the highest min_version <= version, of the per-thread flavour when `per_thread`
/// (families without one ignore it). False when the lookup returns something not covered.
bool variant_by_lookup(const char* family, int version, bool per_thread, Variant* out) noexcept;

/// A wrapper of `variant` bound to exactly `real` (the pointer the real lookup returned); `real`
/// itself when it is null, is one of memguard's own functions, or every slot of the variant is
/// bound to another pointer.
void* bind_variant(Variant variant, void* real) noexcept;

/// What a lookup of `symbol` (cuGetProcAddress semantics, `version`, per-thread flavour or not)
/// that returned `real` should hand back. `relookup(name)` repeats the same lookup for another
/// symbol (used to confirm which ABI cuGetProcAddress("cuGraphInstantiate") returned); it returns
/// null on failure.
template <typename Relookup>
void* wrap_lookup(const char* symbol, int version, bool per_thread, void* real, Relookup& relookup) noexcept;

/// The wrapper for cuGetProcAddress lookups of the names we cover; defined in driver_hooks.cpp.
void* wrap_lookup_result(const char* symbol, int version, bool per_thread, void* real,
                         void* (*relookup)(void* ctx, const char* name), void* ctx) noexcept;

template <typename Relookup>
void* wrap_lookup(const char* symbol, int version, bool per_thread, void* real, Relookup& relookup) noexcept {
    auto thunk = [](void* ctx, const char* name) -> void* { return (*static_cast<Relookup*>(ctx))(name); };
    return wrap_lookup_result(symbol, version, per_thread, real, thunk, &relookup);
}

}  // namespace memguard::interpose

// The wrapped CUDA driver functions. Each variant in driver_table.h has
//   - a forwarder: the exported function of the same name, for programs linked against libcuda
//     (its real function is found like the runtime's, with RealFunction);
//   - wrappers bound to a pointer a lookup returned (dlsym on a libcuda handle, cuGetProcAddress,
//     cudaGetDriverEntryPoint*): kSubSlots instances, each remembering exactly one real pointer, so
//     that two libcuda copies, or a pointer that differs from the exported symbol, each reach
//     their own function.
// Both run the same body: the real call with the caller's exact arguments, its exact result, and
// records around it (for allocations and frees, record_calls.h, shared with runtime_hooks.cpp).
// An allocation reached through several layers (cudaMalloc -> cuMemAlloc_v2) is recorded once,
// by the outermost hook (HookScope), and no call made here is illegal during stream capture: the
// only extra call is cuCtxGetDevice (thread state).
#include "interpose/driver_table.h"

#include <cuda.h>
#undef cuGetProcAddress  // cuda.h maps it to cuGetProcAddress_v2; both are wrapped separately
#undef cuMemAllocHost    // likewise cuMemAllocHost_v2

#include <cstring>
#include <mutex>
#include <utility>

#include "common/log.h"
#include "interpose/hook_support.h"
#include "interpose/record_calls.h"
#include "runtime/fork.h"
#include "track/recorder.h"

using memguard::interpose::ErrnoKeeper;
using memguard::interpose::Variant;
using memguard::track::Api;
using memguard::track::CaptureMode;
using memguard::track::HookScope;
using memguard::track::Kind;
using memguard::track::Recorder;
using memguard::track::StreamArg;

namespace memguard::interpose {

/// The wrappers of each variant, defined by MG_DRIVER_HOOK below; a variant without one fails to
/// link.
template <Variant V>
void* const* wrappers_of() noexcept;

namespace {

constexpr int kSubSlots = 4;

struct VariantInfo {
    const char* name;
    const char* family;
    int min_version;
    bool per_thread;
};

constexpr VariantInfo kVariants[] = {
#define MG_VARIANT_INFO(variant, family, min_version, per_thread) {#variant, #family, min_version, per_thread != 0},
    MG_DRIVER_VARIANTS(MG_VARIANT_INFO)
#undef MG_VARIANT_INFO
};
constexpr int kVariantCount = static_cast<int>(Variant::kCount);
static_assert(sizeof(kVariants) / sizeof(kVariants[0]) == kVariantCount);

std::atomic<void*> g_bound[kVariantCount][kSubSlots];

void* bound_real(Variant v, int slot) noexcept {
    return g_bound[static_cast<int>(v)][slot].load(std::memory_order_acquire);
}

bool family_has_per_thread(const char* family) noexcept {
    for (const VariantInfo& v : kVariants) {
        if (v.per_thread && std::strcmp(v.family, family) == 0) return true;
    }
    return false;
}

using cuda::is_ours;

void* const* wrappers(Variant v) noexcept;  // at the end of the file, after every MG_DRIVER_HOOK

// --- the bodies ---------------------------------------------------------------------------------

int context_device() {
    static cuda::RealFunction<CUresult(CUDAAPI*)(CUdevice*)> get_device("cuCtxGetDevice");
    CUdevice device = 0;
    auto fn = get_device.get();
    if (!fn || fn(&device) != CUDA_SUCCESS) return 0;
    return device;
}

StreamArg stream_of(CUstream s, const char* variant) {
    return stream_arg(reinterpret_cast<cudaStream_t>(s), is_ptsz(variant));
}

template <typename Out, typename Call>
CUresult driver_allocate(const AllocCall& what, Out* out, Call&& call) {
    return allocate_and_record(what, out, std::forward<Call>(call), context_device);
}

template <typename Call>
CUresult driver_release(Api api, uintptr_t ptr, StreamArg stream, Call&& call) {
    return release_and_record(api, ptr, stream, std::forward<Call>(call));
}

// The driver picks the values of reserved addresses and physical handles. Once a range is freed
// (a handle released), another thread's reserve (create) may get the same value back before the
// first thread has written its v (n) record. The virtual-memory order lock keeps the file in call
// order for those pairs: the freeing side holds it over its call and its record, the allocating
// side over its call. Maps and unmaps need no lock: the program picks their addresses, so it
// orders them itself. The lock is the runtime's (runtime/fork.h), so that the one fork function
// takes it in lock order: before the recorder's, which the freeing side takes while holding it.

__attribute__((constructor)) void driver_hooks_init() {
    // Computes memguard's own address range now, not inside a later dlsym call.
    (void)is_ours(nullptr);
}

/// Runs the real call and then `record(recorder)` on success, when this is the outermost hook and
/// memguard records. `order`: hold the virtual-memory order lock over the call (allocating side)
/// or over the call and the record (freeing side).
enum class Order { None, Allocating, Freeing };
template <typename Call, typename Record>
CUresult observe_vmm(Order order, Call&& call, Record&& record) {
    ensure_initialized();
    HookScope scope;
    Recorder& rec = runtime::recorder();
    if (!scope.outermost() || !rec.active()) return call();
    std::unique_lock<std::mutex> lock(runtime::vmm_order_lock(), std::defer_lock);
    if (order != Order::None) lock.lock();
    CUresult err = call();
    if (order == Order::Allocating) lock.unlock();
    if (err == CUDA_SUCCESS) {
        ErrnoKeeper keep_errno;
        record(rec);
    }
    return err;
}

template <typename Call, typename After>
CUresult observe_graph(Call&& call, After&& after) {
    ensure_initialized();
    HookScope scope;
    Recorder& rec = runtime::recorder();
    if (!scope.outermost() || !rec.active()) return call();
    CUresult err = call();
    ErrnoKeeper keep_errno;
    after(rec, err);
    return err;
}

CaptureMode mode_of(CUstreamCaptureMode m) { return static_cast<CaptureMode>(static_cast<int>(m)); }

}  // namespace

// --- the table ----------------------------------------------------------------------------------

bool variant_by_symbol(const char* name, Variant* out) noexcept {
    if (!name || name[0] != 'c' || name[1] != 'u') return false;
    for (int i = 0; i < kVariantCount; ++i) {
        if (std::strcmp(kVariants[i].name, name) == 0) {
            *out = static_cast<Variant>(i);
            return true;
        }
    }
    return false;
}

bool variant_by_lookup(const char* family, int version, bool per_thread, Variant* out) noexcept {
    if (!family || family[0] != 'c' || family[1] != 'u') return false;
    bool flavoured = family_has_per_thread(family);
    int best = -1;
    for (int i = 0; i < kVariantCount; ++i) {
        const VariantInfo& v = kVariants[i];
        if (std::strcmp(v.family, family) != 0 || v.min_version > version) continue;
        if (flavoured && v.per_thread != per_thread) continue;
        if (best < 0 || v.min_version > kVariants[best].min_version) best = i;
    }
    if (best < 0) return false;
    // A newer ABI than any we know may exist above the versions listed: cuGetProcAddress would
    // return it for a high enough version. Only the variant whose range the version falls in is
    // certain, and all listed families are current in CUDA 13.
    *out = static_cast<Variant>(best);
    return true;
}

void* bind_variant(Variant variant, void* real) noexcept {
    if (!real || is_ours(real)) return real;
    int v = static_cast<int>(variant);
    for (int i = 0; i < kSubSlots; ++i) {
        void* bound = g_bound[v][i].load(std::memory_order_acquire);
        if (bound == nullptr) {
            void* expected = nullptr;
            if (g_bound[v][i].compare_exchange_strong(expected, real, std::memory_order_acq_rel))
                return wrappers(variant)[i];
            bound = expected;
        }
        if (bound == real) return wrappers(variant)[i];
    }
    static std::atomic<bool> warned[kVariantCount];
    if (!warned[v].exchange(true)) {
        ErrnoKeeper keep_errno;
        MG_LOG_WARN("more than {} distinct {} functions were looked up; further ones are not recorded", kSubSlots,
                    kVariants[v].name);
    }
    return real;
}

void* wrap_lookup_result(const char* symbol, int version, bool per_thread, void* real,
                         void* (*relookup)(void* ctx, const char* name), void* ctx) noexcept {
    if (!real || !symbol || symbol[0] != 'c' || symbol[1] != 'u') return real;
    if (std::strcmp(symbol, "cuGraphInstantiate") == 0) {
        // From CUDA 12 cuGraphInstantiate is cuGraphInstantiateWithFlags; older versions return a
        // five-argument ABI. Wrap only what is confirmed to be the three-argument one.
        if (version < 12000) return real;
        void* with_flags = relookup(ctx, "cuGraphInstantiateWithFlags");
        return with_flags == real ? bind_variant(Variant::cuGraphInstantiateWithFlags, real) : real;
    }
    Variant v;
    if (!variant_by_lookup(symbol, version, per_thread, &v)) return real;
    return bind_variant(v, real);
}

}  // namespace memguard::interpose

using memguard::interpose::bound_real;
using memguard::interpose::wrappers_of;

#define MG_STRIP(...) __VA_ARGS__

/// Defines variant `name` with parameters PARAMS (parenthesized), the argument names ARGS
/// (parenthesized) and the body (a compound statement using `fn`, the real function).
#define MG_DRIVER_HOOK(name, PARAMS, ARGS, ...)                                                   \
    namespace {                                                                                   \
    using name##_fn = CUresult(CUDAAPI*) PARAMS;                                                  \
    CUresult name##_impl(name##_fn fn, MG_STRIP PARAMS) __VA_ARGS__ template <int I>              \
    CUresult CUDAAPI name##_bound PARAMS {                                                        \
        auto fn = reinterpret_cast<name##_fn>(bound_real(Variant::name, I));                      \
        if (!fn) return CUDA_ERROR_NOT_INITIALIZED; /* unreachable: handed out only once bound */ \
        return name##_impl(fn, MG_STRIP ARGS);                                                    \
    }                                                                                             \
    }                                                                                             \
    namespace memguard::interpose {                                                               \
    template <>                                                                                   \
    void* const* wrappers_of<Variant::name>() noexcept {                                          \
        static void* const w[] = {reinterpret_cast<void*>(&name##_bound<0>),                      \
                                  reinterpret_cast<void*>(&name##_bound<1>),                      \
                                  reinterpret_cast<void*>(&name##_bound<2>),                      \
                                  reinterpret_cast<void*>(&name##_bound<3>)};                     \
        static_assert(sizeof(w) / sizeof(w[0]) == memguard::interpose::kSubSlots);                \
        return w;                                                                                 \
    }                                                                                             \
    }                                                                                             \
    MG_EXPORT CUresult CUDAAPI name PARAMS {                                                      \
        static ::memguard::cuda::RealFunction<name##_fn> real(#name);                             \
        name##_fn fn = real.get();                                                                \
        if (!fn) {                                                                                \
            ::memguard::cuda::report_missing(#name);                                              \
            return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;                                     \
        }                                                                                         \
        return name##_impl(fn, MG_STRIP ARGS);                                                    \
    }

using memguard::interpose::driver_allocate;
using memguard::interpose::driver_release;
using memguard::interpose::mode_of;
using memguard::interpose::observe_graph;
using memguard::interpose::observe_vmm;
using memguard::interpose::Order;
using memguard::interpose::stream_of;

// --- allocation ---------------------------------------------------------------------------------
MG_DRIVER_HOOK(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t size), (dptr, size), {
    return driver_allocate({Api::cuMemAlloc, Kind::Device, {}, size}, dptr, [&] { return fn(dptr, size); });
})

MG_DRIVER_HOOK(cuMemAllocManaged, (CUdeviceptr * dptr, size_t size, unsigned int flags), (dptr, size, flags), {
    return driver_allocate({Api::cuMemAllocManaged, Kind::Managed, {}, size}, dptr,
                           [&] { return fn(dptr, size, flags); });
})

MG_DRIVER_HOOK(
    cuMemAllocPitch_v2, (CUdeviceptr * dptr, size_t* pitch, size_t width, size_t height, unsigned int element_size),
    (dptr, pitch, width, height, element_size), {
        // On failure the pitch is not set: the failure reports the bytes the caller asked for.
        return driver_allocate({Api::cuMemAllocPitch, Kind::Device, {}, uint64_t{width} * height, pitch, height}, dptr,
                               [&] { return fn(dptr, pitch, width, height, element_size); });
    })

MG_DRIVER_HOOK(cuMemHostAlloc, (void** pp, size_t size, unsigned int flags), (pp, size, flags), {
    return driver_allocate({Api::cuMemHostAlloc, Kind::Pinned, {}, size}, pp, [&] { return fn(pp, size, flags); });
})

// Programs that use the driver API for pinned memory. (CUDA 13's runtime, static or shared, uses
// cuMemHostAlloc for cudaMallocHost too.) Both ABIs record the size the caller asked for.
MG_DRIVER_HOOK(cuMemAllocHost_v2, (void** pp, size_t size), (pp, size), {
    return driver_allocate({Api::cuMemAllocHost, Kind::Pinned, {}, size}, pp, [&] { return fn(pp, size); });
})

MG_DRIVER_HOOK(cuMemAllocHost, (void** pp, unsigned int size), (pp, size), {
    return driver_allocate({Api::cuMemAllocHost, Kind::Pinned, {}, size}, pp, [&] { return fn(pp, size); });
})

MG_DRIVER_HOOK(cuMemFree_v2, (CUdeviceptr dptr), (dptr),
               { return driver_release(Api::cuMemFree, dptr, {}, [&] { return fn(dptr); }); })

MG_DRIVER_HOOK(cuMemFreeHost, (void* p), (p), {
    return driver_release(Api::cuMemFreeHost, reinterpret_cast<uintptr_t>(p), {}, [&] { return fn(p); });
})

#define MG_MEM_ALLOC_ASYNC(name)                                                                          \
    MG_DRIVER_HOOK(name, (CUdeviceptr * dptr, size_t size, CUstream stream), (dptr, size, stream), {      \
        return driver_allocate({Api::cuMemAllocAsync, Kind::Async, stream_of(stream, #name), size}, dptr, \
                               [&] { return fn(dptr, size, stream); });                                   \
    })
MG_MEM_ALLOC_ASYNC(cuMemAllocAsync)
MG_MEM_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define MG_MEM_ALLOC_FROM_POOL_ASYNC(name)                                                                          \
    MG_DRIVER_HOOK(name, (CUdeviceptr * dptr, size_t size, CUmemoryPool pool, CUstream stream),                     \
                   (dptr, size, pool, stream), {                                                                    \
                       return driver_allocate({Api::cuMemAllocFromPoolAsync, Kind::Async, stream_of(stream, #name), \
                                               size},                                                               \
                                              dptr, [&] { return fn(dptr, size, pool, stream); });                  \
                   })
MG_MEM_ALLOC_FROM_POOL_ASYNC(cuMemAllocFromPoolAsync)
MG_MEM_ALLOC_FROM_POOL_ASYNC(cuMemAllocFromPoolAsync_ptsz)

#define MG_MEM_FREE_ASYNC(name)                                                                                       \
    MG_DRIVER_HOOK(name, (CUdeviceptr dptr, CUstream stream), (dptr, stream), {                                       \
        return driver_release(Api::cuMemFreeAsync, dptr, stream_of(stream, #name), [&] { return fn(dptr, stream); }); \
    })
MG_MEM_FREE_ASYNC(cuMemFreeAsync)
MG_MEM_FREE_ASYNC(cuMemFreeAsync_ptsz)

// --- virtual memory management ------------------------------------------------------------------
MG_DRIVER_HOOK(cuMemAddressReserve,
               (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),
               (ptr, size, alignment, addr, flags), {
                   return observe_vmm(
                       Order::Allocating, [&] { return fn(ptr, size, alignment, addr, flags); },
                       [&](Recorder& rec) {
                           if (!ptr || *ptr == 0) return;
                           uintptr_t ips[Recorder::kStackCapacity];
                           int n = rec.capture_stack(ips);
                           rec.record_reserve(*ptr, size, ips, n);
                       });
               })

MG_DRIVER_HOOK(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size), {
    return observe_vmm(
        Order::Freeing, [&] { return fn(ptr, size); }, [&](Recorder& rec) { rec.record_address_free(ptr, size); });
})

MG_DRIVER_HOOK(cuMemCreate,
               (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,
                unsigned long long flags),
               (handle, size, prop, flags), {
                   // The device is the one the caller asked for, read from prop: no context query (the calling
                   // thread may have no current context, and the memory need not be on the current device).
                   int device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
                   return observe_vmm(
                       Order::Allocating, [&] { return fn(handle, size, prop, flags); },
                       [&](Recorder& rec) {
                           if (!handle) return;
                           uintptr_t ips[Recorder::kStackCapacity];
                           int n = rec.capture_stack(ips);
                           rec.record_create(*handle, size, device, ips, n);
                       });
               })

MG_DRIVER_HOOK(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle), {
    return observe_vmm(
        Order::Freeing, [&] { return fn(handle); }, [&](Recorder& rec) { rec.record_release(handle); });
})

// A reference more to the handle mapped at `addr` (the same value cuMemCreate returned), which a
// later cuMemRelease gives back: NCCL frees its buffers so (retain, release, unmap, release). The
// release the report writes is the handle's last. Under the order lock over the call and the
// count, as a release is: a release on another thread counts this reference or runs before it.
MG_DRIVER_HOOK(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void* addr), (handle, addr), {
    return observe_vmm(
        Order::Freeing, [&] { return fn(handle, addr); },
        [&](Recorder& rec) {
            if (handle) rec.record_retain(*handle);
        });
})

// A handle to memory another allocation owns, from a shareable handle (a file descriptor or a
// fabric handle another process exported: NCCL maps its peers' buffers so). Its mappings are
// known, its memory is not this process's: the report says `m`, not `N`, and its release `n`.
MG_DRIVER_HOOK(cuMemImportFromShareableHandle,
               (CUmemGenericAllocationHandle * handle, void* os_handle, CUmemAllocationHandleType type),
               (handle, os_handle, type), {
                   return observe_vmm(
                       Order::Allocating, [&] { return fn(handle, os_handle, type); },
                       [&](Recorder& rec) {
                           if (!handle) return;
                           uintptr_t ips[Recorder::kStackCapacity];
                           int n = rec.capture_stack(ips);
                           rec.record_import(*handle, ips, n);
                       });
               })

MG_DRIVER_HOOK(cuMemMap,
               (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                unsigned long long flags),
               (ptr, size, offset, handle, flags), {
                   return observe_vmm(
                       Order::None, [&] { return fn(ptr, size, offset, handle, flags); },
                       [&](Recorder& rec) { rec.record_map(ptr, size, offset, handle); });
               })

MG_DRIVER_HOOK(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size), {
    return observe_vmm(
        Order::None, [&] { return fn(ptr, size); }, [&](Recorder& rec) { rec.record_unmap(ptr, size); });
})

// --- stream capture and graphs (as graph_hooks.cpp) ---------------------------------------------
#define MG_CU_BEGIN_CAPTURE(name)                                                                          \
    MG_DRIVER_HOOK(name, (CUstream stream, CUstreamCaptureMode mode), (stream, mode), {                    \
        return observe_graph([&] { return fn(stream, mode); },                                             \
                             [&](Recorder& rec, CUresult err) {                                            \
                                 if (err == CUDA_SUCCESS)                                                  \
                                     rec.record_capture_begin(stream_of(stream, #name), mode_of(mode), 0); \
                             });                                                                           \
    })
MG_CU_BEGIN_CAPTURE(cuStreamBeginCapture_v2)
MG_CU_BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz)

#define MG_CU_BEGIN_CAPTURE_TO_GRAPH(name)                                                                            \
    MG_DRIVER_HOOK(name,                                                                                              \
                   (CUstream stream, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,            \
                    size_t num_deps, CUstreamCaptureMode mode),                                                       \
                   (stream, graph, deps, edges, num_deps, mode), {                                                    \
                       return observe_graph([&] { return fn(stream, graph, deps, edges, num_deps, mode); },           \
                                            [&](Recorder& rec, CUresult err) {                                        \
                                                if (err == CUDA_SUCCESS)                                              \
                                                    rec.record_capture_begin(stream_of(stream, #name), mode_of(mode), \
                                                                             memguard::interpose::handle(graph));     \
                                            });                                                                       \
                   })
MG_CU_BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph)
MG_CU_BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph_ptsz)

// The capture ends on success, and on failure because it was invalidated (no graph).
#define MG_CU_END_CAPTURE(name)                                                                                        \
    MG_DRIVER_HOOK(name, (CUstream stream, CUgraph * graph), (stream, graph), {                                        \
        return observe_graph([&] { return fn(stream, graph); },                                                        \
                             [&](Recorder& rec, CUresult err) {                                                        \
                                 if (err != CUDA_SUCCESS && err != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) return;      \
                                 uintptr_t g = err == CUDA_SUCCESS && graph ? memguard::interpose::handle(*graph) : 0; \
                                 rec.record_capture_end(stream_of(stream, #name), static_cast<int>(err), g);           \
                             });                                                                                       \
    })
MG_CU_END_CAPTURE(cuStreamEndCapture)
MG_CU_END_CAPTURE(cuStreamEndCapture_ptsz)

MG_DRIVER_HOOK(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode * mode), (mode), {
    CUstreamCaptureMode requested = mode ? *mode : CU_STREAM_CAPTURE_MODE_GLOBAL;
    CUresult err = fn(mode);
    if (err == CUDA_SUCCESS && mode) memguard::track::set_thread_capture_mode(mode_of(requested));
    return err;
})

#define MG_CU_INSTANTIATE(name, Extra)                                                             \
    MG_DRIVER_HOOK(name, (CUgraphExec * exec, CUgraph graph, Extra extra), (exec, graph, extra), { \
        return observe_graph([&] { return fn(exec, graph, extra); },                               \
                             [&](Recorder& rec, CUresult err) {                                    \
                                 if (err == CUDA_SUCCESS && exec)                                  \
                                     rec.record_instantiate(memguard::interpose::handle(*exec),    \
                                                            memguard::interpose::handle(graph));   \
                             });                                                                   \
    })
MG_CU_INSTANTIATE(cuGraphInstantiateWithFlags, unsigned long long)
MG_CU_INSTANTIATE(cuGraphInstantiateWithParams, CUDA_GRAPH_INSTANTIATE_PARAMS*)
MG_CU_INSTANTIATE(cuGraphInstantiateWithParams_ptsz, CUDA_GRAPH_INSTANTIATE_PARAMS*)

#define MG_CU_LAUNCH(name)                                                                   \
    MG_DRIVER_HOOK(name, (CUgraphExec exec, CUstream stream), (exec, stream), {              \
        return observe_graph([&] { return fn(exec, stream); },                               \
                             [&](Recorder& rec, CUresult err) {                              \
                                 if (err == CUDA_SUCCESS)                                    \
                                     rec.record_launch(memguard::interpose::handle(exec),    \
                                                       memguard::interpose::handle(stream)); \
                             });                                                             \
    })
MG_CU_LAUNCH(cuGraphLaunch)
MG_CU_LAUNCH(cuGraphLaunch_ptsz)

MG_DRIVER_HOOK(cuGraphExecDestroy, (CUgraphExec exec), (exec), {
    return observe_graph([&] { return fn(exec); },
                         [&](Recorder& rec, CUresult err) {
                             if (err == CUDA_SUCCESS) rec.record_exec_destroy(memguard::interpose::handle(exec));
                         });
})

MG_DRIVER_HOOK(cuGraphDestroy, (CUgraph graph), (graph), {
    return observe_graph([&] { return fn(graph); },
                         [&](Recorder& rec, CUresult err) {
                             if (err == CUDA_SUCCESS) rec.record_graph_destroy(memguard::interpose::handle(graph));
                         });
})

// --- lookups: cuGetProcAddress hands back our wrappers ------------------------------------------
// The real lookup runs with the caller's exact symbol, version, flags (and status pointer); only a
// returned pointer of a covered variant is replaced. Lookups of cuGetProcAddress itself return a
// wrapper of it (variant by version), so a program that fetches it that way is covered too.
MG_DRIVER_HOOK(cuGetProcAddress, (const char* symbol, void** pfn, int version, cuuint64_t flags),
               (symbol, pfn, version, flags), {
                   CUresult err = fn(symbol, pfn, version, flags);
                   if (err == CUDA_SUCCESS && pfn && *pfn) {
                       ErrnoKeeper keep_errno;
                       auto relookup = [&](const char* name) -> void* {
                           void* p = nullptr;
                           return fn(name, &p, version, flags) == CUDA_SUCCESS ? p : nullptr;
                       };
                       *pfn = memguard::interpose::wrap_lookup(symbol, version,
                                                               (flags &
                                                                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0,
                                                               *pfn, relookup);
                   }
                   return err;
               })

MG_DRIVER_HOOK(cuGetProcAddress_v2,
               (const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status),
               (symbol, pfn, version, flags, status), {
                   CUresult err = fn(symbol, pfn, version, flags, status);
                   if (err == CUDA_SUCCESS && pfn && *pfn) {
                       ErrnoKeeper keep_errno;
                       auto relookup = [&](const char* name) -> void* {
                           void* p = nullptr;
                           CUdriverProcAddressQueryResult st;
                           return fn(name, &p, version, flags, &st) == CUDA_SUCCESS ? p : nullptr;
                       };
                       *pfn = memguard::interpose::wrap_lookup(symbol, version,
                                                               (flags &
                                                                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0,
                                                               *pfn, relookup);
                   }
                   return err;
               })

namespace memguard::interpose {
namespace {
void* const* wrappers(Variant v) noexcept {
    switch (v) {
#define MG_VARIANT_CASE(variant, family, min_version, per_thread) \
    case Variant::variant: return wrappers_of<Variant::variant>();
        MG_DRIVER_VARIANTS(MG_VARIANT_CASE)
#undef MG_VARIANT_CASE
    case Variant::kCount: break;
    }
    return nullptr;
}
}  // namespace
}  // namespace memguard::interpose

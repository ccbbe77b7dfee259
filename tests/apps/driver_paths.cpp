// Reaches the CUDA driver through one lookup path (argv[1]) and runs the same workload through
// the functions it found: every allocation kind, a virtual-memory sequence like PyTorch's
// expandable segments (reserve, create + map pages, unmap + release, free the range), a misuse the
// driver rejects, and a capture with a graph. Paths:
//   direct, direct_ptsz           the exported symbols (the program links libcuda.so.1)
//   dlsym, dlsym_ptsz             dlopen("libcuda.so.1") + dlsym(handle, "<variant name>")
//   proc_v1, proc_v2, proc_v2_ptds cuGetProcAddress (4 arguments, version 12080) / _v2 (13000),
//                                 found by dlsym, then asked for itself; _ptds: the per-thread flag
//   proc_v2_legacy                 cuGetProcAddress_v2 with CU_GET_PROC_ADDRESS_LEGACY_STREAM
//   entry, entry_ptsz             cudaGetDriverEntryPoint / its _ptsz entry point (default flags)
//   by_version, by_version_ptds    cudaGetDriverEntryPointByVersion(12080), default / per-thread
//   runtime                        cudaMalloc/cudaFree only (with FAKE_CUDART_VIA_DRIVER=1 the fake
//                                 runtime calls cuMemAlloc_v2/cuMemFree_v2 underneath)
// Built twice: app_driver_paths (links the fake runtime and driver) and app_static_driver
// (MG_STATIC_STYLE: links neither, like a program with the static cudart: dlopen + dlsym of
// cuGetProcAddress_v2, then everything through it; paths proc_v2 and proc_v2_ptds only).
//
// Log lines: `lookup <name> <module basename>` for every function the path found, `alloc <api>
// <addr> <size>`, `free <api> <addr>`, `vmm <what> ...`, `info <key> <value>` (app_common.h).
#include <cuda.h>
#undef cuGetProcAddress
#undef cuMemAllocHost  // cuda.h maps it to cuMemAllocHost_v2; the CUDA 2.0 ABI is tested too
#ifndef MG_STATIC_STYLE
#include <cuda_runtime_api.h>
#endif

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__clang__)
#define APP_FN extern "C" __attribute__((noinline, visibility("default")))
#else
#define APP_FN extern "C" __attribute__((noipa, visibility("default")))
#endif

// The per-thread variants, declared by cuda.h only under CUDA_API_PER_THREAD_DEFAULT_STREAM, and
// the CUDA 2.0 cuMemAllocHost (32-bit size), declared only for the driver's own build.
extern "C" {
CUresult CUDAAPI cuMemAllocHost(void**, unsigned int);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr*, size_t, CUstream);
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                                  CUstreamCaptureMode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream, CUgraph*);
CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*);
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec, CUstream);
}

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 2 * kMiB;  // the fake driver's granularity, PyTorch's small page

struct Ops {
    CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
    CUresult (*mem_free)(CUdeviceptr) = nullptr;
    CUresult (*alloc_managed)(CUdeviceptr*, size_t, unsigned int) = nullptr;
    CUresult (*alloc_pitch)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int) = nullptr;
    CUresult (*host_alloc)(void**, size_t, unsigned int) = nullptr;
    CUresult (*alloc_host)(void**, size_t) = nullptr;           // cuMemAllocHost_v2
    CUresult (*alloc_host_v1)(void**, unsigned int) = nullptr;  // cuMemAllocHost, CUDA 2.0
    CUresult (*free_host)(void*) = nullptr;
    CUresult (*alloc_async)(CUdeviceptr*, size_t, CUstream) = nullptr;
    CUresult (*alloc_from_pool)(CUdeviceptr*, size_t, CUmemoryPool, CUstream) = nullptr;
    CUresult (*free_async)(CUdeviceptr, CUstream) = nullptr;
    CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
    CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
    CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
    CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
    CUresult (*retain)(CUmemGenericAllocationHandle*, void*) = nullptr;
    CUresult (*import_handle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;
    CUresult (*export_handle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                              unsigned long long) = nullptr;  // not wrapped
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
    CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
    CUresult (*begin_capture)(CUstream, CUstreamCaptureMode) = nullptr;
    CUresult (*begin_capture_to_graph)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                       CUstreamCaptureMode) = nullptr;
    CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
    CUresult (*exchange_mode)(CUstreamCaptureMode*) = nullptr;
    CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
    CUresult (*instantiate_params)(CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*) = nullptr;
    CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
    CUresult (*exec_destroy)(CUgraphExec) = nullptr;
    CUresult (*graph_destroy)(CUgraph) = nullptr;
    CUresult (*graph_create)(CUgraph*, unsigned int) = nullptr;  // not wrapped
};

[[noreturn]] void die(const char* what, int got) {
    std::fprintf(stderr, "app check failed: %s returned %d\n", what, got);
    std::fflush(stdout);
    std::exit(90);
}

void check(const char* what, CUresult r, CUresult want = CUDA_SUCCESS) {
    if (r != want) die(what, static_cast<int>(r));
}

std::string module_of(const void* p) {
    Dl_info info{};
    if (!p || !dladdr(p, &info) || !info.dli_fname) return "none";
    std::string f = info.dli_fname;
    return f.substr(f.find_last_of('/') + 1);
}

template <typename Fn>
void found(const char* name, Fn*& slot, void* p) {
    std::printf("lookup %s %s\n", name, module_of(p).c_str());
    slot = reinterpret_cast<Fn*>(p);
    if (!p) die(name, -1);
}

// ---- the paths ----------------------------------------------------------------------------------

void* open_libcuda() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
        std::exit(91);
    }
    return lib;
}

using Lookup = void* (*)(const char* name, void* ctx);

/// Fills ops by asking `lookup` for each variant name (dlsym) or base name (cuGetProcAddress).
void fill(Ops& o, bool by_base_name, bool ptsz, Lookup lookup, void* ctx) {
    auto name = [&](const char* base, const char* variant, bool has_ptsz) -> std::string {
        if (by_base_name) return base;
        std::string n = variant;
        if (ptsz && has_ptsz) n += "_ptsz";
        return n;
    };
#define FILL(field, base, variant, has_ptsz)               \
    do {                                                   \
        std::string n = name(base, variant, has_ptsz);     \
        found(n.c_str(), o.field, lookup(n.c_str(), ctx)); \
    } while (0)
    FILL(mem_alloc, "cuMemAlloc", "cuMemAlloc_v2", false);
    FILL(mem_free, "cuMemFree", "cuMemFree_v2", false);
    FILL(alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged", false);
    FILL(alloc_pitch, "cuMemAllocPitch", "cuMemAllocPitch_v2", false);
    FILL(host_alloc, "cuMemHostAlloc", "cuMemHostAlloc", false);
    FILL(alloc_host, "cuMemAllocHost", "cuMemAllocHost_v2", false);
    // By base name the CUDA 2.0 ABI needs a lookup at version 2000: the caller makes it.
    if (!by_base_name) found("cuMemAllocHost", o.alloc_host_v1, lookup("cuMemAllocHost", ctx));
    FILL(free_host, "cuMemFreeHost", "cuMemFreeHost", false);
    FILL(alloc_async, "cuMemAllocAsync", "cuMemAllocAsync", true);
    FILL(alloc_from_pool, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", true);
    FILL(free_async, "cuMemFreeAsync", "cuMemFreeAsync", true);
    FILL(reserve, "cuMemAddressReserve", "cuMemAddressReserve", false);
    FILL(address_free, "cuMemAddressFree", "cuMemAddressFree", false);
    FILL(create, "cuMemCreate", "cuMemCreate", false);
    FILL(release, "cuMemRelease", "cuMemRelease", false);
    FILL(retain, "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", false);
    FILL(import_handle, "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", false);
    FILL(export_handle, "cuMemExportToShareableHandle", "cuMemExportToShareableHandle", false);
    FILL(map, "cuMemMap", "cuMemMap", false);
    FILL(unmap, "cuMemUnmap", "cuMemUnmap", false);
    FILL(begin_capture, "cuStreamBeginCapture", "cuStreamBeginCapture_v2", true);
    FILL(begin_capture_to_graph, "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph", true);
    FILL(end_capture, "cuStreamEndCapture", "cuStreamEndCapture", true);
    FILL(exchange_mode, "cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode", false);
    FILL(instantiate, by_base_name ? "cuGraphInstantiate" : "cuGraphInstantiateWithFlags",
         "cuGraphInstantiateWithFlags", false);
    FILL(instantiate_params, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams", true);
    FILL(launch, "cuGraphLaunch", "cuGraphLaunch", true);
    FILL(exec_destroy, "cuGraphExecDestroy", "cuGraphExecDestroy", false);
    FILL(graph_destroy, "cuGraphDestroy", "cuGraphDestroy", false);
    FILL(graph_create, "cuGraphCreate", "cuGraphCreate", false);
#undef FILL
}

[[maybe_unused]] void* dlsym_lookup(const char* name, void* handle) { return dlsym(handle, name); }

struct ProcCtx {
    CUresult (*v1)(const char*, void**, int, cuuint64_t) = nullptr;
    CUresult (*v2)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;
    int version = 0;
    cuuint64_t flags = 0;
};

void* proc_lookup(const char* name, void* ctx) {
    auto* c = static_cast<ProcCtx*>(ctx);
    void* p = nullptr;
    if (c->v2) {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        check(name, c->v2(name, &p, c->version, c->flags, &status));
        if (status != CU_GET_PROC_ADDRESS_SUCCESS) die(name, 1000 + status);
    } else {
        check(name, c->v1(name, &p, c->version, c->flags));
    }
    return p;
}

/// cuGetProcAddress found with dlsym, then asked for itself (a program that got it from the
/// runtime or the driver uses that pointer from then on); also checks that an old ABI passes
/// through: cuMemAlloc at version 2000 is the 32-bit one. cuMemAllocHost at 2000 is its 32-bit
/// ABI too, which is wrapped (it returns a real host block).
void fill_by_proc_address(Ops& o, bool v2, int version, cuuint64_t flags) {
    void* lib = open_libcuda();
    ProcCtx ctx;
    ctx.version = version;
    ctx.flags = flags;
    if (v2) {
        found("cuGetProcAddress_v2", ctx.v2, dlsym(lib, "cuGetProcAddress_v2"));
        found("cuGetProcAddress@self", ctx.v2, proc_lookup("cuGetProcAddress", &ctx));
    } else {
        found("cuGetProcAddress", ctx.v1, dlsym(lib, "cuGetProcAddress"));
        // From 12000 the driver answers this lookup with the 5-argument cuGetProcAddress_v2.
        ProcCtx self = ctx;
        self.version = 11040;
        found("cuGetProcAddress@self", ctx.v1, proc_lookup("cuGetProcAddress", &self));
    }
    fill(o, true, false, proc_lookup, &ctx);
    ProcCtx old = ctx;
    old.version = 2000;
    CUresult (*alloc_v1)(unsigned int*, unsigned int) = nullptr;
    found("cuMemAlloc@2000", alloc_v1, proc_lookup("cuMemAlloc", &old));
    found("cuMemAllocHost@2000", o.alloc_host_v1, proc_lookup("cuMemAllocHost", &old));
    unsigned int p32 = 0;
    check("cuMemAlloc@2000", alloc_v1(&p32, 4096));
    // Not a driver function memguard wraps: untouched.
    CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
    found("cuMemGetAllocationGranularity", granularity, proc_lookup("cuMemGetAllocationGranularity", &ctx));
}

#ifndef MG_STATIC_STYLE
struct EntryCtx {
    bool by_version = false;
    bool ptsz = false;
    unsigned int version = 12080;  // by_version only
    unsigned long long flags = cudaEnableDefault;
};

extern "C" cudaError_t cudaGetDriverEntryPoint_ptsz(const char*, void**, unsigned long long,
                                                    cudaDriverEntryPointQueryResult*);
extern "C" cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char*, void**, unsigned int, unsigned long long,
                                                             cudaDriverEntryPointQueryResult*);

void* entry_lookup(const char* name, void* ctx) {
    auto* c = static_cast<EntryCtx*>(ctx);
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    cudaError_t r;
    if (c->by_version) {
        r = c->ptsz ? cudaGetDriverEntryPointByVersion_ptsz(name, &p, c->version, c->flags, &status)
                    : cudaGetDriverEntryPointByVersion(name, &p, c->version, c->flags, &status);
    } else {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        r = c->ptsz ? cudaGetDriverEntryPoint_ptsz(name, &p, c->flags, &status)
                    : cudaGetDriverEntryPoint(name, &p, c->flags, &status);
#pragma GCC diagnostic pop
    }
    if (r != cudaSuccess || status != cudaDriverEntryPointSuccess) die(name, static_cast<int>(r));
    return p;
}
#endif

// ---- the workload -------------------------------------------------------------------------------

void log_alloc(const char* api, uintptr_t p, size_t size) {
    std::printf("alloc %s 0x%llx %zu\n", api, static_cast<unsigned long long>(p), size);
}

APP_FN void driver_allocations(const Ops& o) {
    CUdeviceptr d = 0, managed = 0, pitched = 0, async_null = 0, async_stream = 0, pooled = 0;
    void* host = nullptr;
    void* pinned = nullptr;
    void* pinned_v1 = nullptr;
    size_t pitch = 0;
    auto stream = reinterpret_cast<CUstream>(uintptr_t{0x5000});
    auto pool = reinterpret_cast<CUmemoryPool>(uintptr_t{0x7000});
    check("mem_alloc", o.mem_alloc(&d, 3 * kMiB));
    log_alloc("cuMemAlloc", d, 3 * kMiB);
    check("alloc_managed", o.alloc_managed(&managed, 5 * kMiB, CU_MEM_ATTACH_GLOBAL));
    log_alloc("cuMemAllocManaged", managed, 5 * kMiB);
    check("alloc_pitch", o.alloc_pitch(&pitched, &pitch, 1000, 7, 4));
    log_alloc("cuMemAllocPitch", pitched, pitch * 7);
    check("host_alloc", o.host_alloc(&host, 11 * 4096, 0));
    log_alloc("cuMemHostAlloc", reinterpret_cast<uintptr_t>(host), 11 * 4096);
    std::memset(host, 1, 11 * 4096);
    // Over 4 GiB (address space only: the fake's pages are never touched past the first few), so
    // a 32-bit-size wrapper bound to cuMemAllocHost_v2 would show as a truncated size.
    const size_t big = (size_t{1} << 32) + 7 * 4096;
    check("alloc_host", o.alloc_host(&pinned, big));
    log_alloc("cuMemAllocHost", reinterpret_cast<uintptr_t>(pinned), big);
    check("alloc_host_v1", o.alloc_host_v1(&pinned_v1, 3 * 4096));
    log_alloc("cuMemAllocHost", reinterpret_cast<uintptr_t>(pinned_v1), 3 * 4096);
    std::memset(pinned, 2, 7 * 4096);
    std::memset(pinned_v1, 3, 3 * 4096);
    check("alloc_async null", o.alloc_async(&async_null, 13 * 4096, nullptr));
    log_alloc("cuMemAllocAsync", async_null, 13 * 4096);
    check("alloc_async", o.alloc_async(&async_stream, 17 * 4096, stream));
    log_alloc("cuMemAllocAsync", async_stream, 17 * 4096);
    check("alloc_from_pool", o.alloc_from_pool(&pooled, 19 * 4096, pool, stream));
    log_alloc("cuMemAllocFromPoolAsync", pooled, 19 * 4096);
    // Rejected calls write nothing.
    check("mem_alloc null", o.mem_alloc(nullptr, 4096), CUDA_ERROR_INVALID_VALUE);

    check("mem_free", o.mem_free(d));
    check("free_host", o.free_host(host));
    check("free_host pinned", o.free_host(pinned));
    check("free_host pinned_v1", o.free_host(pinned_v1));
    // A rejected call is recorded as a failure of the kind and api it asked for.
    check("alloc_host null", o.alloc_host(nullptr, 4 * 4096), CUDA_ERROR_INVALID_VALUE);
    check("free_async null", o.free_async(async_null, nullptr));
    check("free_async", o.free_async(async_stream, stream));
    check("free_async pooled", o.free_async(pooled, stream));
    check("mem_free managed", o.mem_free(managed));
    // pitched stays live at exit.
    std::printf("info live_at_exit 0x%llx\n", static_cast<unsigned long long>(pitched));
}

/// PyTorch's expandable segments: a large reserved range, pages created and mapped as the segment
/// grows, unmapped and released as it shrinks, the range freed at the end.
APP_FN void expandable_segment(const Ops& o) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    const size_t reserved = 16 * kPage;
    CUdeviceptr base = 0;
    check("reserve", o.reserve(&base, reserved, 0, 0, 0));
    std::printf("vmm reserve 0x%llx %zu\n", static_cast<unsigned long long>(base), reserved);
    CUmemGenericAllocationHandle pages[3] = {};
    for (int i = 0; i < 3; ++i) {
        check("create", o.create(&pages[i], kPage, &prop, 0));
        check("map", o.map(base + i * kPage, kPage, 0, pages[i], 0));
    }
    // A double page on device 1 mapped from its second half.
    CUmemGenericAllocationHandle big = 0;
    prop.location.id = 1;
    check("create big", o.create(&big, 2 * kPage, &prop, 0));
    check("map big", o.map(base + 8 * kPage, kPage, kPage, big, 0));
    // Misuse the driver rejects: mapping over a mapped page, creating without properties.
    check("map twice", o.map(base, kPage, 0, pages[1], 0), CUDA_ERROR_INVALID_VALUE);
    CUmemGenericAllocationHandle none = 0;
    check("create no prop", o.create(&none, kPage, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    std::printf("info mapped_peak %zu\n", 4 * kPage);
    // Shrink: unmap two pages at once, release them.
    check("unmap", o.unmap(base + kPage, 2 * kPage));
    check("release 1", o.release(pages[1]));
    check("release 2", o.release(pages[2]));
    // Release before unmap (allowed): the memory stays until the unmap.
    check("release 0", o.release(pages[0]));
    check("unmap 0", o.unmap(base, kPage));
    // A peer's buffer, as NCCL maps the other ranks' memory: big exported as a file descriptor
    // and imported (here by the same process), mapped, unmapped, released. A rejected import
    // writes nothing.
    int fd = -1;
    check("export big", o.export_handle(&fd, big, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemGenericAllocationHandle peer = 0;
    void* os_handle = reinterpret_cast<void*>(static_cast<uintptr_t>(fd));
    check("import", o.import_handle(&peer, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    check("import unknown",
          o.import_handle(&none, reinterpret_cast<void*>(uintptr_t{7}), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          CUDA_ERROR_INVALID_VALUE);
    check("map peer", o.map(base + 10 * kPage, 2 * kPage, 0, peer, 0));
    check("unmap peer", o.unmap(base + 10 * kPage, 2 * kPage));
    check("release peer", o.release(peer));
    // NCCL's free (ncclCuMemFree): a reference retained from the address and given back, then the
    // unmap and the handle's own release, which alone ends it.
    CUmemGenericAllocationHandle again = 0;
    check("retain big", o.retain(&again, reinterpret_cast<void*>(base + 8 * kPage)));
    if (again != big) die("retain big: another handle", static_cast<int>(again));
    check("release retained big", o.release(again));
    check("unmap big", o.unmap(base + 8 * kPage, kPage));
    check("release big", o.release(big));
    check("address free", o.address_free(base, reserved));
}

APP_FN void capture_and_graph(const Ops& o) {
    auto stream = reinterpret_cast<CUstream>(uintptr_t{0x6000});
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    check("exchange", o.exchange_mode(&mode));
    check("exchange back", o.exchange_mode(&mode));
    check("begin", o.begin_capture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CUdeviceptr in_capture = 0;
    check("alloc_async in capture", o.alloc_async(&in_capture, 23 * 4096, stream));
    CUgraph graph = nullptr;
    check("end", o.end_capture(stream, &graph));
    CUgraphExec exec = nullptr;
    check("instantiate", o.instantiate(&exec, graph, 0));
    check("launch", o.launch(exec, stream));
    check("launch 2", o.launch(exec, stream));
    check("exec destroy", o.exec_destroy(exec));
    // Into a graph of the caller's, then WithParams.
    CUgraph mine = nullptr;
    check("graph create", o.graph_create(&mine, 0));
    check("begin to graph", o.begin_capture_to_graph(stream, mine, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUgraph captured = nullptr;
    check("end 2", o.end_capture(stream, &captured));
    CUDA_GRAPH_INSTANTIATE_PARAMS params{};
    CUgraphExec exec2 = nullptr;
    check("instantiate params", o.instantiate_params(&exec2, captured, &params));
    check("exec destroy 2", o.exec_destroy(exec2));
    check("graph destroy", o.graph_destroy(graph));
    check("graph destroy 2", o.graph_destroy(mine));
    check("free in capture", o.free_async(in_capture, stream));
    std::printf("info graph 0x%llx\n", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(graph)));
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PATH\n", argv[0]);
        return 2;
    }
    std::string path = argv[1];
    Ops o;
#ifndef MG_STATIC_STYLE
    if (path == "runtime") {
        void* p = nullptr;
        if (cudaMalloc(&p, 29 * 4096) != cudaSuccess) die("cudaMalloc", 0);
        log_alloc("cudaMalloc", reinterpret_cast<uintptr_t>(p), 29 * 4096);
        if (cudaFree(p) != cudaSuccess) die("cudaFree", 0);
        return 0;
    }
    if (path == "direct" || path == "direct_ptsz") {
        bool ptsz = path == "direct_ptsz";
        // The program's own references to the exported names, as a program linked with -lcuda.
#define DIRECT(field, sym) found(#sym, o.field, reinterpret_cast<void*>(&sym))
        DIRECT(mem_alloc, cuMemAlloc_v2);
        DIRECT(mem_free, cuMemFree_v2);
        DIRECT(alloc_managed, cuMemAllocManaged);
        DIRECT(alloc_pitch, cuMemAllocPitch_v2);
        DIRECT(host_alloc, cuMemHostAlloc);
        DIRECT(alloc_host, cuMemAllocHost_v2);
        DIRECT(alloc_host_v1, cuMemAllocHost);
        DIRECT(free_host, cuMemFreeHost);
        if (ptsz) {
            DIRECT(alloc_async, cuMemAllocAsync_ptsz);
            DIRECT(alloc_from_pool, cuMemAllocFromPoolAsync_ptsz);
            DIRECT(free_async, cuMemFreeAsync_ptsz);
            DIRECT(begin_capture, cuStreamBeginCapture_v2_ptsz);
            DIRECT(begin_capture_to_graph, cuStreamBeginCaptureToGraph_ptsz);
            DIRECT(end_capture, cuStreamEndCapture_ptsz);
            DIRECT(instantiate_params, cuGraphInstantiateWithParams_ptsz);
            DIRECT(launch, cuGraphLaunch_ptsz);
        } else {
            DIRECT(alloc_async, cuMemAllocAsync);
            DIRECT(alloc_from_pool, cuMemAllocFromPoolAsync);
            DIRECT(free_async, cuMemFreeAsync);
            DIRECT(begin_capture, cuStreamBeginCapture_v2);
            DIRECT(begin_capture_to_graph, cuStreamBeginCaptureToGraph);
            DIRECT(end_capture, cuStreamEndCapture);
            DIRECT(instantiate_params, cuGraphInstantiateWithParams);
            DIRECT(launch, cuGraphLaunch);
        }
        DIRECT(reserve, cuMemAddressReserve);
        DIRECT(address_free, cuMemAddressFree);
        DIRECT(create, cuMemCreate);
        DIRECT(release, cuMemRelease);
        DIRECT(retain, cuMemRetainAllocationHandle);
        DIRECT(import_handle, cuMemImportFromShareableHandle);
        DIRECT(export_handle, cuMemExportToShareableHandle);
        DIRECT(map, cuMemMap);
        DIRECT(unmap, cuMemUnmap);
        DIRECT(exchange_mode, cuThreadExchangeStreamCaptureMode);
        DIRECT(instantiate, cuGraphInstantiateWithFlags);
        DIRECT(exec_destroy, cuGraphExecDestroy);
        DIRECT(graph_destroy, cuGraphDestroy);
        DIRECT(graph_create, cuGraphCreate);
#undef DIRECT
    } else if (path == "dlsym" || path == "dlsym_ptsz") {
        fill(o, false, path == "dlsym_ptsz", dlsym_lookup, open_libcuda());
    } else if (path == "proc_v1") {
        fill_by_proc_address(o, false, 12080, CU_GET_PROC_ADDRESS_DEFAULT);
    } else if (path == "proc_v2_legacy") {
        fill_by_proc_address(o, true, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    } else if (path == "entry" || path == "entry_ptsz" || path == "by_version" || path == "by_version_ptds") {
        EntryCtx ctx;
        ctx.by_version = path.rfind("by_version", 0) == 0;
        ctx.ptsz = path == "entry_ptsz";
        if (path == "by_version_ptds") ctx.flags = cudaEnablePerThreadDefaultStream;
        fill(o, true, false, entry_lookup, &ctx);
        EntryCtx old = ctx;
        old.by_version = true;
        old.version = 2000;
        found("cuMemAllocHost@2000", o.alloc_host_v1, entry_lookup("cuMemAllocHost", &old));
    } else
#endif
        if (path == "proc_v2" || path == "proc_v2_ptds") {
        fill_by_proc_address(o, true, 13000,
                             path == "proc_v2_ptds" ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                    : CU_GET_PROC_ADDRESS_DEFAULT);
    } else {
        std::fprintf(stderr, "unknown path %s\n", path.c_str());
        return 2;
    }
    driver_allocations(o);
    expandable_segment(o);
    capture_and_graph(o);
    std::printf("done\n");
    return 0;
}

// A fake CUDA driver for tests: libcuda.so.1 with the driver functions memguard wraps, backed by
// host memory and bookkeeping. What tests rely on behaves like the real driver:
//   - cuGetProcAddress (4 arguments, CUDA 11.3) and cuGetProcAddress_v2 (CUDA 12) return, for a
//     base name, the variant whose version is the highest one <= cudaVersion, the _ptsz variant
//     when flags has CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (the legacy one otherwise, and
//     for functions that have no per-thread variant); CUDA_SUCCESS with a null pointer and the
//     status SYMBOL_NOT_FOUND / VERSION_NOT_SUFFICIENT when there is none; CUDA_ERROR_INVALID_VALUE
//     for a version above the driver's (13000) or unknown flags. The pointers are the exported
//     functions (as dlsym returns them).
//   - Virtual memory: cuMemAddressReserve hands out ranges of a fake address space (never
//     dereferenced), sizes must be multiples of the 2 MiB granularity; cuMemCreate needs a device
//     location; cuMemMap needs a live handle, a range inside one reservation that is not mapped,
//     and offset + size within the handle; cuMemUnmap must cover whole mappings; cuMemRelease of a
//     mapped handle succeeds and the memory goes when its last mapping does;
//     cuMemRetainAllocationHandle of a mapped address returns the handle mapped there (the same
//     value) with one reference more, which a cuMemRelease gives back (the handle is released with
//     its last reference, as the driver counts them); cuMemExportToShareableHandle of a handle
//     created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its requested types gives a file
//     descriptor (a token, not a real one) that cuMemImportFromShareableHandle turns into a new
//     handle to the same memory (mappable, released on its own, not counted in the physical bytes
//     again); cuMemAddressFree
//     needs the exact reserved range with nothing mapped in it. Misuse returns
//     CUDA_ERROR_INVALID_VALUE (and touches nothing).
//   - Allocation functions return host memory (pinned memory is writable); frees of unknown
//     pointers return CUDA_ERROR_INVALID_VALUE.
//   - Stream capture and graphs: per-stream capture state (the per-thread stream and the null
//     stream of _ptsz calls are per thread), graphs and execs as handles.
// fakecu_* functions (fake_cuda_driver_control.h) expose the bookkeeping to test programs.
#include "fake_cuda_driver_control.h"

#include <cuda.h>
// cuda.h maps these names to their current variants; the fake defines every variant by its own
// exported name.
#undef cuGetProcAddress
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemAllocPitch
#undef cuMemAllocHost

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

namespace {

constexpr size_t kGranularity = size_t{2} << 20;
constexpr int kDriverVersion = 13000;
constexpr uintptr_t kVaBase = 0x600000000000;

struct Physical {
    size_t size = 0;
    int device = 0;
    bool released = false;
    int mappings = 0;
    int retained = 0;  // references cuMemRetainAllocationHandle added, not yet released
    unsigned long long handle_types = 0;  // prop->requestedHandleTypes: what it may be exported as
    bool imported = false;                // cuMemImportFromShareableHandle made it: the exporter's memory
};

struct Mapping {
    size_t size = 0;
    size_t offset = 0;
    CUmemGenericAllocationHandle handle = 0;
};

struct StreamKey {
    uintptr_t handle = 0;
    uint64_t thread = 0;
    bool operator<(const StreamKey& o) const { return handle != o.handle ? handle < o.handle : thread < o.thread; }
};

struct Capture {
    CUgraph graph = nullptr;
};

struct State {
    std::mutex mu;
    std::map<uintptr_t, size_t> device_blocks;  // cuMemAlloc*, managed, async
    std::map<uintptr_t, size_t> host_blocks;    // cuMemHostAlloc, cuMemAllocHost
    std::map<uintptr_t, size_t> reservations;   // va -> size
    std::map<CUmemGenericAllocationHandle, Physical> handles;
    std::map<uintptr_t, Mapping> mappings;  // va -> mapping
    std::map<int, CUmemGenericAllocationHandle> exported;  // file descriptor (a token) -> handle
    int next_fd = 1000;
    uintptr_t next_va = kVaBase;
    uintptr_t next_handle = 0x1000;
    uint32_t next_v1 = 0x10000;  // 32-bit addresses of the CUDA 2.0 cuMemAlloc
    std::map<StreamKey, Capture> captures;
    std::set<CUgraph> graphs;
    std::set<CUgraphExec> execs;
    uintptr_t next_object = 0x100000;  // graphs and execs: handles never reused
    uint64_t alloc_calls = 0;
    uint64_t lookups = 0;
};

State& state() {
    static State* s = new State();
    return *s;
}

thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

uint64_t thread_token() {
    static std::atomic<uint64_t> next{1};
    thread_local uint64_t token = next.fetch_add(1);
    return token;
}

StreamKey key_of(CUstream stream, bool ptsz) {
    auto h = reinterpret_cast<uintptr_t>(stream);
    bool per_thread = h == 0x2 || (ptsz && h == 0);
    return per_thread ? StreamKey{0x2, thread_token()} : StreamKey{h, 0};
}

void* host_alloc(size_t size) {
    size_t rounded = (size + 255) / 256 * 256;
    return std::aligned_alloc(256, rounded);
}

CUresult alloc_host_block(void** pp, size_t size) {
    if (!pp || size == 0) return CUDA_ERROR_INVALID_VALUE;
    void* p = host_alloc(size);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.alloc_calls;
    s.host_blocks[reinterpret_cast<uintptr_t>(p)] = size;
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult alloc_device(CUdeviceptr* dptr, size_t size) {
    if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    void* p = host_alloc(size);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.alloc_calls;
    s.device_blocks[reinterpret_cast<uintptr_t>(p)] = size;
    *dptr = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
}

CUresult free_device(CUdeviceptr dptr) {
    if (dptr == 0) return CUDA_SUCCESS;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.device_blocks.find(static_cast<uintptr_t>(dptr));
    if (it == s.device_blocks.end()) return CUDA_ERROR_INVALID_VALUE;
    std::free(reinterpret_cast<void*>(it->first));
    s.device_blocks.erase(it);
    return CUDA_SUCCESS;
}

void drop_physical_if_unused(State& s, CUmemGenericAllocationHandle h) {
    auto it = s.handles.find(h);
    if (it != s.handles.end() && it->second.released && it->second.mappings == 0) s.handles.erase(it);
}

}  // namespace

extern "C" {

// ---- control (fake_cuda_driver_control.h) --------------------------------------------------------
size_t fakecu_reserved_bytes(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    size_t n = 0;
    for (auto& [va, size] : s.reservations) n += size;
    return n;
}
size_t fakecu_mapped_bytes(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    size_t n = 0;
    for (auto& [va, m] : s.mappings) n += m.size;
    return n;
}
size_t fakecu_physical_bytes(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    size_t n = 0;
    for (auto& [h, p] : s.handles) n += p.imported ? 0 : p.size;
    return n;
}
size_t fakecu_device_bytes(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    size_t n = 0;
    for (auto& [p, size] : s.device_blocks) n += size;
    return n;
}
uint64_t fakecu_lookup_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.lookups;
}

// ---- basics -------------------------------------------------------------------------------------
CUresult CUDAAPI cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult CUDAAPI cuDriverGetVersion(int* version) {
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = kDriverVersion;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

// A context is always current (the runtime's primary one), on a device of 16 GiB that has the
// virtual memory calls and no GPUDirect RDMA.
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    static int primary;
    *ctx = reinterpret_cast<CUcontext>(&primary);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
    if (!bytes || device != 0) return CUDA_ERROR_INVALID_VALUE;
    *bytes = size_t{16} << 30;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice device) {
    if (!value || device != 0) return CUDA_ERROR_INVALID_VALUE;
    *value = attrib == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? 1 : 0;
    return CUDA_SUCCESS;
}

// ---- allocation ---------------------------------------------------------------------------------
// The CUDA 2.0 ABI: 32-bit device addresses and sizes. Bookkeeping only (never dereferenced).
CUresult CUDAAPI cuMemAlloc(unsigned int* dptr, unsigned int size) {
    if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.alloc_calls;
    *dptr = s.next_v1;
    s.next_v1 += (size + 255) / 256 * 256;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(unsigned int dptr) { return dptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t size) { return alloc_device(dptr, size); }

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) { return free_device(dptr); }

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t size, unsigned int flags) {
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    return alloc_device(dptr, size);
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                    unsigned int element_size) {
    if (!pitch || (element_size != 4 && element_size != 8 && element_size != 16)) return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) / 512 * 512;
    CUresult r = alloc_device(dptr, p * height);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t size, unsigned int) { return alloc_host_block(pp, size); }

// Both ABIs: the CUDA 2.0 one takes a 32-bit size; the pointer is a host pointer either way.
CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int size) { return alloc_host_block(pp, size); }
CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t size) { return alloc_host_block(pp, size); }

CUresult CUDAAPI cuMemFreeHost(void* p) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.host_blocks.find(reinterpret_cast<uintptr_t>(p));
    if (it == s.host_blocks.end()) return CUDA_ERROR_INVALID_VALUE;
    std::free(p);
    s.host_blocks.erase(it);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t size, CUstream) { return alloc_device(dptr, size); }
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t size, CUstream) { return alloc_device(dptr, size); }
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool, CUstream) {
    return pool ? alloc_device(dptr, size) : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t size, CUmemoryPool pool, CUstream) {
    return pool ? alloc_device(dptr, size) : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream) { return free_device(dptr); }
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) { return free_device(dptr); }

// ---- virtual memory management ------------------------------------------------------------------
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags) {
    if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
    if (!ptr || size == 0 || size % kGranularity != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    size_t align = alignment > kGranularity ? alignment : kGranularity;
    uintptr_t va = (s.next_va + align - 1) / align * align;
    s.next_va = va + size + kGranularity;  // a guard gap between ranges
    s.reservations[va] = size;
    *ptr = va;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.reservations.find(ptr);
    if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    auto m = s.mappings.lower_bound(ptr);
    if (m != s.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
    s.reservations.erase(it);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
    if (!handle || !prop || flags != 0 || size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id > 7)
        return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    CUmemGenericAllocationHandle h = s.next_handle++;
    Physical p;
    p.size = size;
    p.device = prop->location.id;
    p.handle_types = prop->requestedHandleTypes;
    s.handles[h] = p;
    *handle = h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.handles.find(handle);
    if (it == s.handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
    if (it->second.retained > 0) {
        --it->second.retained;
        return CUDA_SUCCESS;
    }
    it->second.released = true;
    drop_physical_if_unused(s, handle);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto va = reinterpret_cast<uintptr_t>(addr);
    auto m = s.mappings.upper_bound(va);
    if (m == s.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --m;
    if (va >= m->first + m->second.size) return CUDA_ERROR_INVALID_VALUE;
    auto h = s.handles.find(m->second.handle);
    if (h == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    ++h->second.retained;
    *handle = m->second.handle;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType type, unsigned long long flags) {
    if (!shareable || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto h = s.handles.find(handle);
    if (h == s.handles.end() || h->second.released || (h->second.handle_types & type) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int fd = s.next_fd++;
    s.exported[fd] = handle;
    *static_cast<int*>(shareable) = fd;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                                CUmemAllocationHandleType type) {
    if (!handle || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto e = s.exported.find(static_cast<int>(reinterpret_cast<uintptr_t>(os_handle)));
    if (e == s.exported.end()) return CUDA_ERROR_INVALID_VALUE;
    auto from = s.handles.find(e->second);
    if (from == s.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    // A handle of its own to the same memory (the exporter's: its bytes are not counted again).
    Physical p = from->second;
    p.released = false;
    p.mappings = 0;
    p.retained = 0;
    p.imported = true;
    CUmemGenericAllocationHandle h = s.next_handle++;
    s.handles[h] = p;
    *handle = h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
    if (flags != 0 || size == 0 || size % kGranularity != 0 || offset % kGranularity != 0)
        return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto h = s.handles.find(handle);
    if (h == s.handles.end() || h->second.released || offset + size > h->second.size) return CUDA_ERROR_INVALID_VALUE;
    // Inside one reservation.
    auto r = s.reservations.upper_bound(ptr);
    if (r == s.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
    --r;
    if (ptr + size > r->first + r->second) return CUDA_ERROR_INVALID_VALUE;
    // Not overlapping a mapping.
    auto m = s.mappings.lower_bound(ptr);
    if (m != s.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
    if (m != s.mappings.begin()) {
        auto prev = std::prev(m);
        if (prev->first + prev->second.size > ptr) return CUDA_ERROR_INVALID_VALUE;
    }
    s.mappings[ptr] = Mapping{size, offset, handle};
    ++h->second.mappings;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    // The range must be whole mappings, back to back.
    uintptr_t at = ptr;
    while (at < ptr + size) {
        auto m = s.mappings.find(at);
        if (m == s.mappings.end() || at + m->second.size > ptr + size) return CUDA_ERROR_INVALID_VALUE;
        at += m->second.size;
    }
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    at = ptr;
    while (at < ptr + size) {
        auto m = s.mappings.find(at);
        size_t n = m->second.size;
        CUmemGenericAllocationHandle h = m->second.handle;
        s.mappings.erase(m);
        --s.handles[h].mappings;
        drop_physical_if_unused(s, h);
        at += n;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    return desc && count > 0 && size > 0 && ptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- stream capture and graphs ------------------------------------------------------------------
static CUresult begin_capture(CUstream stream, bool ptsz, CUgraph into) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    StreamKey k = key_of(stream, ptsz);
    if (k.handle == 0) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy null stream
    if (s.captures.count(k)) return CUDA_ERROR_ILLEGAL_STATE;
    if (into && !s.graphs.count(into)) return CUDA_ERROR_INVALID_VALUE;
    s.captures[k] = Capture{into};
    return CUDA_SUCCESS;
}

static CUresult end_capture(CUstream stream, bool ptsz, CUgraph* graph) {
    if (!graph) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.captures.find(key_of(stream, ptsz));
    if (it == s.captures.end()) return CUDA_ERROR_ILLEGAL_STATE;
    CUgraph g = it->second.graph;
    if (!g) {
        g = reinterpret_cast<CUgraph>(s.next_object++);
        s.graphs.insert(g);
    }
    s.captures.erase(it);
    *graph = g;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphCreate(CUgraph* graph, unsigned int flags) {
    if (!graph || flags) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    *graph = reinterpret_cast<CUgraph>(s.next_object++);
    s.graphs.insert(*graph);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode) {
    return begin_capture(stream, false, nullptr);
}
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode) {
    return begin_capture(stream, true, nullptr);
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode*, const CUgraphEdgeData*,
                                             size_t, CUstreamCaptureMode) {
    return graph ? begin_capture(stream, false, graph) : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode*,
                                                  const CUgraphEdgeData*, size_t, CUstreamCaptureMode) {
    return graph ? begin_capture(stream, true, graph) : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream stream, CUgraph* graph) { return end_capture(stream, false, graph); }
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) { return end_capture(stream, true, graph); }

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
    if (!mode || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec* exec, CUgraph graph) {
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.graphs.count(graph)) return CUDA_ERROR_INVALID_VALUE;
    *exec = reinterpret_cast<CUgraphExec>(s.next_object++);
    s.execs.insert(*exec);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
    return instantiate(exec, graph);
}
CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    if (!params) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = instantiate(exec, graph);
    params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}
CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    return cuGraphInstantiateWithParams(exec, graph, params);
}

static CUresult launch(CUgraphExec exec) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.execs.count(exec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream) { return launch(exec); }
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec exec, CUstream) { return launch(exec); }

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.execs.erase(exec)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.graphs.erase(graph)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

// ---- cuGetProcAddress ---------------------------------------------------------------------------
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);
CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* status);

}  // extern "C"

namespace {

struct Entry {
    const char* name;
    int version;
    bool per_thread;
    void* fn;
};

#define FAKE_ENTRY(name, version, fn) \
    { name, version, false, reinterpret_cast<void*>(&fn) }
#define FAKE_ENTRY_PTSZ(name, version, fn) \
    { name, version, true, reinterpret_cast<void*>(&fn) }

const Entry kEntries[] = {
    FAKE_ENTRY("cuInit", 2000, cuInit),
    FAKE_ENTRY("cuDriverGetVersion", 2020, cuDriverGetVersion),
    FAKE_ENTRY("cuCtxGetDevice", 2000, cuCtxGetDevice),
    FAKE_ENTRY("cuGetProcAddress", 11030, cuGetProcAddress),
    FAKE_ENTRY("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    FAKE_ENTRY("cuMemAlloc", 2000, cuMemAlloc),
    FAKE_ENTRY("cuMemAlloc", 3020, cuMemAlloc_v2),
    FAKE_ENTRY("cuMemFree", 2000, cuMemFree),
    FAKE_ENTRY("cuMemFree", 3020, cuMemFree_v2),
    FAKE_ENTRY("cuMemAllocManaged", 6000, cuMemAllocManaged),
    FAKE_ENTRY("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    FAKE_ENTRY("cuMemHostAlloc", 2020, cuMemHostAlloc),
    FAKE_ENTRY("cuMemAllocHost", 2000, cuMemAllocHost),
    FAKE_ENTRY("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    FAKE_ENTRY("cuMemFreeHost", 2000, cuMemFreeHost),
    FAKE_ENTRY("cuMemAllocAsync", 11020, cuMemAllocAsync),
    FAKE_ENTRY_PTSZ("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    FAKE_ENTRY("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    FAKE_ENTRY_PTSZ("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    FAKE_ENTRY("cuMemFreeAsync", 11020, cuMemFreeAsync),
    FAKE_ENTRY_PTSZ("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    FAKE_ENTRY("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    FAKE_ENTRY("cuMemAddressReserve", 10020, cuMemAddressReserve),
    FAKE_ENTRY("cuMemAddressFree", 10020, cuMemAddressFree),
    FAKE_ENTRY("cuMemCreate", 10020, cuMemCreate),
    FAKE_ENTRY("cuMemRelease", 10020, cuMemRelease),
    FAKE_ENTRY("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    FAKE_ENTRY("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    FAKE_ENTRY("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    FAKE_ENTRY("cuMemMap", 10020, cuMemMap),
    FAKE_ENTRY("cuMemUnmap", 10020, cuMemUnmap),
    FAKE_ENTRY("cuMemSetAccess", 10020, cuMemSetAccess),
    FAKE_ENTRY("cuGraphCreate", 10000, cuGraphCreate),
    FAKE_ENTRY("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    FAKE_ENTRY_PTSZ("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2_ptsz),
    FAKE_ENTRY("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph),
    FAKE_ENTRY_PTSZ("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph_ptsz),
    FAKE_ENTRY("cuStreamEndCapture", 10000, cuStreamEndCapture),
    FAKE_ENTRY_PTSZ("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    FAKE_ENTRY("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    FAKE_ENTRY("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    FAKE_ENTRY("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    FAKE_ENTRY("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    FAKE_ENTRY_PTSZ("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams_ptsz),
    FAKE_ENTRY("cuGraphLaunch", 10000, cuGraphLaunch),
    FAKE_ENTRY_PTSZ("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    FAKE_ENTRY("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    FAKE_ENTRY("cuGraphDestroy", 10000, cuGraphDestroy),
};

CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (version > kDriverVersion || (flags & ~cuuint64_t{3}) != 0) return CUDA_ERROR_INVALID_VALUE;
    {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mu);
        ++s.lookups;
    }
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const Entry* best = nullptr;
    bool known = false;
    for (const Entry& e : kEntries) {
        if (std::strcmp(e.name, symbol) != 0) continue;
        known = true;
        if (e.version > version) continue;
        // The per-thread variant when asked for and one exists; the legacy one otherwise.
        if (e.per_thread && !per_thread) continue;
        if (!best || e.version > best->version || (e.version == best->version && e.per_thread)) best = &e;
    }
    *pfn = best ? best->fn : nullptr;
    if (status) {
        *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}

}  // namespace

extern "C" {
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
    return lookup(symbol, pfn, version, flags, nullptr);
}
CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* status) {
    return lookup(symbol, pfn, version, flags, status);
}
}

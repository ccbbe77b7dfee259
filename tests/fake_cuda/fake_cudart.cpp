// A fake CUDA runtime for tests: the allocation subset of libcudart.so.13, backed by host memory,
// with stream capture (per-stream capture state, per-thread interaction modes, CUDA's rule for
// potentially unsafe calls) and graphs that do nothing when launched.
//
// It is built as libcudart.so.13 with the real library's symbol version node (libcudart.so.13)
// and DT_SYMBOLIC, and every function is defined against <cuda_runtime_api.h>, so programs link
// and bind to it exactly as they do to the real runtime. See README.md in this directory for the
// behaviour it promises and the choices made where the real runtime's behaviour is not specified.
//
// Internal calls never go through an exported function, so a preloaded interposer sees each
// call of the program exactly once.

#include "fake_cuda_control.h"

#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr size_t k_alignment = 256;
constexpr size_t k_pinned_alignment = 4096;
constexpr size_t k_pitch_alignment = 512;
constexpr size_t k_default_capacity = size_t{16} << 30;
constexpr int k_max_devices = 64;

enum class BlockKind { device, async, managed, pinned };

bool is_gpu(BlockKind kind) { return kind != BlockKind::pinned; }

struct Block {
    size_t size = 0;  // as requested (pitch * height for cudaMallocPitch)
    BlockKind kind = BlockKind::device;
    int device = 0;  // -1 for pinned host memory
};

// A stream as capture state sees it. cudaStreamPerThread (and the null stream of the _ptsz entry
// points) is a different stream in every thread, so its key carries the thread's token.
struct StreamKey {
    cudaStream_t handle = nullptr;
    uint64_t thread = 0;
    bool operator<(const StreamKey& other) const {
        return handle != other.handle ? std::less<cudaStream_t>()(handle, other.handle) : thread < other.thread;
    }
};

// A capture sequence in progress on one stream.
struct Capture {
    unsigned long long id = 0;  // unique over the process's lifetime, from 1
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    uint64_t thread = 0;  // token of the thread that began it
    bool invalidated = false;
    cudaGraph_t graph = nullptr;  // the graph captured into
    bool own_graph = true;        // made by cudaStreamBeginCapture (not the caller's graph)
};

struct State {
    std::mutex mutex;
    std::map<uintptr_t, Block> blocks;   // by start address
    std::vector<size_t> live_gpu_bytes;  // per device
    size_t live_pinned_bytes = 0;
    size_t capacity = k_default_capacity;
    int device_count = 1;
    uint64_t alloc_calls = 0;  // every call of an allocating function
    uint64_t fail_at = 0;      // FAKE_CUDA_FAIL_AT; 0 when off
    int fail_next_count = 0;
    cudaError_t fail_next_error = cudaErrorMemoryAllocation;
    uint64_t successful_allocs = 0;
    std::set<cudaStream_t> streams;
    // Stream capture and graphs (see "Stream capture and graphs" in README.md).
    std::map<StreamKey, Capture> captures;  // in progress (active or invalidated), by stream
    unsigned long long next_capture_id = 1;
    std::set<cudaGraph_t> graphs;
    std::set<cudaGraphExec_t> execs;
    uint64_t graph_launches = 0;
    std::map<cudaEvent_t, unsigned long long> events;  // event -> capture it was last recorded in
};

// Default pools have no state; their handles are the addresses of these bytes.
char pool_tokens[k_max_devices];

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
// The thread's stream capture interaction mode (cudaThreadExchangeStreamCaptureMode).
thread_local cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;

// A number per thread, never reused (unlike thread ids), so a capture's owner is never confused
// with a later thread.
uint64_t thread_token() {
    static std::atomic<uint64_t> next{1};
    thread_local uint64_t token = next.fetch_add(1);
    return token;
}

// Parses an unsigned decimal environment variable; warns and keeps `fallback` when malformed.
uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    errno = 0;
    char* end = nullptr;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-') {
        std::fprintf(stderr, "fake_cuda: ignoring %s=%s (not an unsigned decimal)\n", name, text);
        return fallback;
    }
    return value;
}

// Never destroyed, so that it works from other libraries' destructors and atexit handlers.
State& state() {
    static State* instance = [] {
        auto* s = new State();
        s->capacity = env_u64("FAKE_CUDA_CAPACITY", k_default_capacity);
        s->device_count = static_cast<int>(std::min<uint64_t>(env_u64("FAKE_CUDA_DEVICES", 1), k_max_devices));
        s->fail_at = env_u64("FAKE_CUDA_FAIL_AT", 0);
        s->live_gpu_bytes.assign(static_cast<size_t>(s->device_count), 0);
        return s;
    }();
    return *instance;
}

cudaError_t fail(cudaError_t error) {
    last_error = error;
    return error;
}

bool round_up(size_t value, size_t multiple, size_t* out) {
    if (value > SIZE_MAX - (multiple - 1)) return false;
    *out = (value + multiple - 1) / multiple * multiple;
    return true;
}

bool is_builtin_stream(cudaStream_t stream) {
    return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

// Caller holds the mutex.
bool is_valid_stream(State& s, cudaStream_t stream) {
    return is_builtin_stream(stream) || s.streams.count(stream) != 0;
}

// Caller holds the mutex. Counts the call and says whether an injected failure applies.
cudaError_t injected_failure(State& s) {
    ++s.alloc_calls;
    if (s.fail_next_count > 0) {
        --s.fail_next_count;
        return s.fail_next_error;
    }
    if (s.fail_at != 0 && s.alloc_calls == s.fail_at) return cudaErrorMemoryAllocation;
    return cudaSuccess;
}

// Caller holds the mutex. CUDA's rule for "potentially unsafe" calls (cudaMalloc, cudaFree, ...;
// see cudaThreadExchangeStreamCaptureMode): prohibited when the calling thread has a capture in
// progress that was not begun in relaxed mode, unless the thread's own mode is relaxed, or when
// the thread's mode is global and another thread has a global-mode capture in progress. A
// prohibited call invalidates every capture that prohibits it; returns whether it is prohibited.
bool prohibit_unsafe_call(State& s) {
    if (s.captures.empty()) return false;
    const uint64_t me = thread_token();
    bool prohibited = false;
    for (auto& entry : s.captures) {
        Capture& capture = entry.second;
        bool own = capture.thread == me;
        bool offends = (own && capture.mode != cudaStreamCaptureModeRelaxed &&
                        capture_mode != cudaStreamCaptureModeRelaxed) ||
                       (!own && capture.mode == cudaStreamCaptureModeGlobal &&
                        capture_mode == cudaStreamCaptureModeGlobal);
        if (offends) {
            capture.invalidated = true;
            prohibited = true;
        }
    }
    return prohibited;
}

// The common path of all seven allocating functions. `ptr` may be null (then the call fails with
// cudaErrorInvalidValue after being counted). `device` is ignored for pinned memory.
cudaError_t allocate(void** ptr, size_t size, BlockKind kind, int device, cudaError_t size_zero_result) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (ptr != nullptr) *ptr = nullptr;
    if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) return fail(injected);
    if (ptr == nullptr) return fail(cudaErrorInvalidValue);
    if (s.device_count == 0) return fail(cudaErrorNoDevice);
    if (size == 0) return size_zero_result == cudaSuccess ? cudaSuccess : fail(size_zero_result);
    // Stream-ordered allocation is legal during capture; the others are potentially unsafe.
    if (kind != BlockKind::async && prohibit_unsafe_call(s)) {
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (is_gpu(kind)) {
        size_t live = s.live_gpu_bytes[static_cast<size_t>(device)];
        if (size > s.capacity || live > s.capacity - size) return fail(cudaErrorMemoryAllocation);
    }

    size_t alignment = kind == BlockKind::pinned ? k_pinned_alignment : k_alignment;
    size_t rounded = 0;
    if (!round_up(size, alignment, &rounded)) return fail(cudaErrorMemoryAllocation);
    void* memory = std::aligned_alloc(alignment, rounded);
    if (memory == nullptr) return fail(cudaErrorMemoryAllocation);

    Block block;
    block.size = size;
    block.kind = kind;
    block.device = kind == BlockKind::pinned ? -1 : device;
    s.blocks[reinterpret_cast<uintptr_t>(memory)] = block;
    if (is_gpu(kind)) {
        s.live_gpu_bytes[static_cast<size_t>(device)] += size;
    } else {
        s.live_pinned_bytes += size;
    }
    ++s.successful_allocs;
    *ptr = memory;
    return cudaSuccess;
}

enum class FreeFamily { device, host };

// The common path of cudaFree, cudaFreeAsync and cudaFreeHost.
cudaError_t release(void* ptr, FreeFamily family, const cudaStream_t* stream) {
    State& s = state();
    void* memory = nullptr;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (stream != nullptr && !is_valid_stream(s, *stream)) {
            return fail(cudaErrorInvalidResourceHandle);
        }
        if (ptr == nullptr) return cudaSuccess;
        // cudaFree and cudaFreeHost are potentially unsafe; cudaFreeAsync is legal during capture.
        if (stream == nullptr && prohibit_unsafe_call(s)) {
            return fail(cudaErrorStreamCaptureUnsupported);
        }
        auto it = s.blocks.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == s.blocks.end()) return fail(cudaErrorInvalidValue);
        const Block& block = it->second;
        bool host_block = block.kind == BlockKind::pinned;
        if (host_block != (family == FreeFamily::host)) return fail(cudaErrorInvalidValue);
        if (host_block) {
            s.live_pinned_bytes -= block.size;
        } else {
            s.live_gpu_bytes[static_cast<size_t>(block.device)] -= block.size;
        }
        memory = ptr;
        s.blocks.erase(it);
    }
    std::free(memory);
    return cudaSuccess;
}

bool is_valid_device(const State& s, int device) { return device >= 0 && device < s.device_count; }

// The device a default pool handle belongs to, or -1.
int pool_device(cudaMemPool_t pool) {
    auto address = reinterpret_cast<uintptr_t>(pool);
    auto first = reinterpret_cast<uintptr_t>(&pool_tokens[0]);
    if (address < first || address >= first + k_max_devices) return -1;
    return static_cast<int>(address - first);
}

struct ErrorText {
    cudaError_t code;
    const char* name;
    const char* text;
};

constexpr ErrorText k_error_texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const ErrorText* find_error_text(cudaError_t error) {
    for (const ErrorText& entry : k_error_texts) {
        if (entry.code == error) return &entry;
    }
    return nullptr;
}

}  // namespace

// ---- control functions (fake only) --------------------------------------------------------------

extern "C" {

void fakecuda_set_capacity(size_t bytes) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.capacity = bytes;
}

void fakecuda_fail_next(int count, int error) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.fail_next_count = std::max(count, 0);
    s.fail_next_error = static_cast<cudaError_t>(error);
}

size_t fakecuda_live_bytes(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    size_t total = 0;
    for (size_t bytes : s.live_gpu_bytes) total += bytes;
    return total;
}

size_t fakecuda_live_pinned_bytes(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.live_pinned_bytes;
}

uint64_t fakecuda_alloc_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.successful_allocs;
}

uint64_t fakecuda_live_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.blocks.size();
}

uint64_t fakecuda_capture_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.captures.size();
}

uint64_t fakecuda_graph_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.graphs.size();
}

uint64_t fakecuda_graph_exec_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.execs.size();
}

uint64_t fakecuda_graph_launch_count(void) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.graph_launches;
}

}  // extern "C"

// ---- allocation ---------------------------------------------------------------------------------

namespace {
bool via_driver();
cudaError_t driver_malloc(void** devPtr, size_t size);
cudaError_t driver_free(void* devPtr);
}  // namespace

cudaError_t cudaMalloc(void** devPtr, size_t size) {
    if (via_driver()) return driver_malloc(devPtr, size);
    return allocate(devPtr, size, BlockKind::device, current_device, cudaSuccess);
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (devPtr != nullptr) *devPtr = nullptr;
        if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) {
            return fail(injected);
        }
        return fail(cudaErrorInvalidValue);
    }
    // Documented: "If size is 0, cudaMallocManaged returns cudaErrorInvalidValue".
    return allocate(devPtr, size, BlockKind::managed, current_device, cudaErrorInvalidValue);
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
    size_t rounded_width = 0;
    bool fits = round_up(width, k_pitch_alignment, &rounded_width) &&
                (height == 0 || rounded_width <= SIZE_MAX / height);
    if (pitch == nullptr || !fits) {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (devPtr != nullptr) *devPtr = nullptr;
        if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) {
            return fail(injected);
        }
        return fail(pitch == nullptr ? cudaErrorInvalidValue : cudaErrorMemoryAllocation);
    }
    cudaError_t result = allocate(devPtr, rounded_width * height, BlockKind::device, current_device, cudaSuccess);
    *pitch = result == cudaSuccess ? rounded_width : 0;
    return result;
}

namespace {

cudaError_t malloc_async(void** devPtr, size_t size, cudaStream_t hStream) {
    {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!is_valid_stream(s, hStream)) {
            if (devPtr != nullptr) *devPtr = nullptr;
            if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) {
                return fail(injected);
            }
            return fail(cudaErrorInvalidResourceHandle);
        }
    }
    return allocate(devPtr, size, BlockKind::async, current_device, cudaSuccess);
}

cudaError_t malloc_from_pool_async(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
    int device = pool_device(memPool);
    {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        bool valid_pool = is_valid_device(s, device);
        if (!valid_pool || !is_valid_stream(s, stream)) {
            if (ptr != nullptr) *ptr = nullptr;
            if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) {
                return fail(injected);
            }
            return fail(valid_pool ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
        }
    }
    return allocate(ptr, size, BlockKind::async, device, cudaSuccess);
}

}  // namespace

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
    return malloc_async(devPtr, size, hStream);
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
    return malloc_from_pool_async(ptr, size, memPool, stream);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return allocate(ptr, size, BlockKind::pinned, -1, cudaSuccess); }

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    constexpr unsigned int known_flags = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if ((flags & ~known_flags) != 0) {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (pHost != nullptr) *pHost = nullptr;
        if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) {
            return fail(injected);
        }
        return fail(cudaErrorInvalidValue);
    }
    return allocate(pHost, size, BlockKind::pinned, -1, cudaSuccess);
}

// The per-thread default stream variants (what cudaMallocAsync & co. compile to under
// CUDA_API_PER_THREAD_DEFAULT_STREAM). The header declares them only in that mode.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream);
}

cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
    return malloc_async(devPtr, size, hStream);
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
    return malloc_from_pool_async(ptr, size, memPool, stream);
}

// ---- free ---------------------------------------------------------------------------------------

cudaError_t cudaFree(void* devPtr) {
    if (via_driver()) return driver_free(devPtr);
    return release(devPtr, FreeFamily::device, nullptr);
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) { return release(devPtr, FreeFamily::device, &hStream); }

cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
    return release(devPtr, FreeFamily::device, &hStream);
}

cudaError_t cudaFreeHost(void* ptr) { return release(ptr, FreeFamily::host, nullptr); }

// ---- devices ------------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
    if (count == nullptr) return fail(cudaErrorInvalidValue);
    State& s = state();
    *count = s.device_count;
    return s.device_count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
    if (device == nullptr) return fail(cudaErrorInvalidValue);
    if (state().device_count == 0) return fail(cudaErrorNoDevice);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    State& s = state();
    if (s.device_count == 0) return fail(cudaErrorNoDevice);
    if (!is_valid_device(s, device)) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
    if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.device_count == 0) return fail(cudaErrorNoDevice);
    size_t used = s.live_gpu_bytes[static_cast<size_t>(current_device)];
    *total = s.capacity;
    *free = used < s.capacity ? s.capacity - used : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
    if (memPool == nullptr) return fail(cudaErrorInvalidValue);
    if (!is_valid_device(state(), device)) return fail(cudaErrorInvalidDevice);
    *memPool = reinterpret_cast<cudaMemPool_t>(&pool_tokens[device]);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
    if (memPool == nullptr) return fail(cudaErrorInvalidValue);
    if (!is_valid_device(state(), device)) return fail(cudaErrorInvalidDevice);
    *memPool = reinterpret_cast<cudaMemPool_t>(&pool_tokens[device]);
    return cudaSuccess;
}

// ---- errors -------------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
    cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char* cudaGetErrorString(cudaError_t error) {
    const ErrorText* entry = find_error_text(error);
    return entry != nullptr ? entry->text : "unrecognized error code";
}

const char* cudaGetErrorName(cudaError_t error) {
    const ErrorText* entry = find_error_text(error);
    return entry != nullptr ? entry->name : "unrecognized error code";
}

// ---- streams ------------------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
    if (pStream == nullptr) return fail(cudaErrorInvalidValue);
    // A heap byte gives a distinct, non-null handle that is never one of the built-in ones.
    auto handle = reinterpret_cast<cudaStream_t>(new char);
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.streams.insert(handle);
    *pStream = handle;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    State& s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.streams.erase(stream) == 0) return fail(cudaErrorInvalidResourceHandle);
        // A capture still in progress on the stream ends with it; its own graph is discarded.
        auto capture = s.captures.find(StreamKey{stream, 0});
        if (capture != s.captures.end()) {
            if (capture->second.own_graph) delete reinterpret_cast<char*>(capture->second.graph);
            s.captures.erase(capture);
        }
    }
    delete reinterpret_cast<char*>(stream);
    return cudaSuccess;
}

namespace {

// The key of `stream` for capture state. `ptsz`: called through a _ptsz entry point, where the
// null stream is the per-thread default stream rather than the legacy one.
StreamKey stream_key(cudaStream_t stream, bool ptsz) {
    if (stream == cudaStreamPerThread || (ptsz && stream == nullptr)) {
        return StreamKey{cudaStreamPerThread, thread_token()};
    }
    if (stream == nullptr) return StreamKey{cudaStreamLegacy, 0};
    return StreamKey{stream, 0};
}

// Caller holds the mutex. The capture in progress on the stream, or null.
Capture* capture_on(State& s, const StreamKey& key) {
    auto it = s.captures.find(key);
    return it == s.captures.end() ? nullptr : &it->second;
}

bool is_valid_mode(cudaStreamCaptureMode mode) {
    return mode == cudaStreamCaptureModeGlobal || mode == cudaStreamCaptureModeThreadLocal ||
           mode == cudaStreamCaptureModeRelaxed;
}

cudaError_t stream_synchronize(cudaStream_t stream, bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!is_valid_stream(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    // Synchronizing a capturing stream is illegal in every mode and invalidates the capture.
    if (Capture* capture = capture_on(s, stream_key(stream, ptsz))) {
        capture->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    return cudaSuccess;
}

}  // namespace

cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return stream_synchronize(stream, false); }

extern "C" cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) { return stream_synchronize(stream, true); }

// ---- stream capture -----------------------------------------------------------------------------

// The per-thread default stream entry points, declared by the header only under
// CUDA_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t* dependencies,
                                               const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                               enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus);
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus* captureStatus_out,
                                          unsigned long long* id_out, cudaGraph_t* graph_out,
                                          const cudaGraphNode_t** dependencies_out,
                                          const cudaGraphEdgeData** edgeData_out, size_t* numDependencies_out);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* instantiateParams);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
}

namespace {

// `target`: the caller's graph (cudaStreamBeginCaptureToGraph), else null.
cudaError_t begin_capture(cudaStream_t stream, cudaGraph_t target, size_t num_dependencies, cudaStreamCaptureMode mode,
                          bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!is_valid_mode(mode)) return fail(cudaErrorInvalidValue);
    if (!is_valid_stream(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    if (target != nullptr && s.graphs.count(target) == 0) return fail(cudaErrorInvalidValue);
    // The fake's graphs have no nodes, so no node can be a dependency.
    if (num_dependencies != 0) return fail(cudaErrorInvalidValue);
    StreamKey key = stream_key(stream, ptsz);
    // "Capture may not be initiated if stream is cudaStreamLegacy."
    if (key.handle == cudaStreamLegacy) return fail(cudaErrorStreamCaptureUnsupported);
    // "... it may only be initiated if the stream is not already in capture mode."
    if (capture_on(s, key) != nullptr) return fail(cudaErrorIllegalState);
    Capture capture;
    capture.id = s.next_capture_id++;
    capture.mode = mode;
    capture.thread = thread_token();
    capture.own_graph = target == nullptr;
    capture.graph = target != nullptr ? target : reinterpret_cast<cudaGraph_t>(new char);
    s.captures[key] = capture;
    return cudaSuccess;
}

cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* pGraph, bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (pGraph == nullptr) return fail(cudaErrorInvalidValue);
    if (!is_valid_stream(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    auto it = s.captures.find(stream_key(stream, ptsz));
    if (it == s.captures.end()) return fail(cudaErrorIllegalState);
    Capture capture = it->second;
    // A capture not begun in relaxed mode must be ended by the thread that began it; the call
    // fails and the capture goes on.
    if (capture.mode != cudaStreamCaptureModeRelaxed && capture.thread != thread_token()) {
        return fail(cudaErrorStreamCaptureWrongThread);
    }
    s.captures.erase(it);
    if (capture.invalidated) {
        if (capture.own_graph) delete reinterpret_cast<char*>(capture.graph);
        *pGraph = nullptr;
        return fail(cudaErrorStreamCaptureInvalidated);
    }
    s.graphs.insert(capture.graph);
    *pGraph = capture.graph;
    return cudaSuccess;
}

// The status of `key`'s capture; fails (legacy stream while a capture is in progress) like the
// real runtime's queries.
cudaError_t capture_status(State& s, cudaStream_t stream, bool ptsz, Capture** found, cudaStreamCaptureStatus* status) {
    if (!is_valid_stream(s, stream)) return cudaErrorInvalidResourceHandle;
    StreamKey key = stream_key(stream, ptsz);
    // Every stream the fake creates is a blocking stream: while one captures, the legacy
    // stream may not be used, not even queried.
    if (key.handle == cudaStreamLegacy && !s.captures.empty()) return cudaErrorStreamCaptureImplicit;
    Capture* capture = capture_on(s, key);
    *found = capture;
    *status = capture == nullptr     ? cudaStreamCaptureStatusNone
              : capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t is_capturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus, bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (pCaptureStatus == nullptr) return fail(cudaErrorInvalidValue);
    Capture* capture = nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaError_t error = capture_status(s, stream, ptsz, &capture, &status); error != cudaSuccess) {
        return fail(error);
    }
    *pCaptureStatus = status;
    return cudaSuccess;
}

cudaError_t get_capture_info(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                             unsigned long long* id_out, cudaGraph_t* graph_out,
                             const cudaGraphNode_t** dependencies_out, const cudaGraphEdgeData** edgeData_out,
                             size_t* numDependencies_out, bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    // captureStatus_out is required; edgeData_out needs dependencies_out.
    if (captureStatus_out == nullptr || (edgeData_out != nullptr && dependencies_out == nullptr)) {
        return fail(cudaErrorInvalidValue);
    }
    Capture* capture = nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaError_t error = capture_status(s, stream, ptsz, &capture, &status); error != cudaSuccess) {
        return fail(error);
    }
    *captureStatus_out = status;
    // The other outputs are valid only for an active capture. The fake's graphs have no nodes,
    // so the dependency set is always empty.
    if (status == cudaStreamCaptureStatusActive) {
        if (id_out != nullptr) *id_out = capture->id;
        if (graph_out != nullptr) *graph_out = capture->graph;
        if (dependencies_out != nullptr) *dependencies_out = nullptr;
        if (edgeData_out != nullptr) *edgeData_out = nullptr;
        if (numDependencies_out != nullptr) *numDependencies_out = 0;
    }
    return cudaSuccess;
}

}  // namespace

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    return begin_capture(stream, nullptr, 0, mode, false);
}

cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    return begin_capture(stream, nullptr, 0, mode, true);
}

namespace {

cudaError_t begin_capture_to_graph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                   size_t numDependencies, cudaStreamCaptureMode mode, bool ptsz) {
    if (graph == nullptr || (numDependencies != 0 && dependencies == nullptr)) {
        return fail(cudaErrorInvalidValue);
    }
    return begin_capture(stream, graph, numDependencies, mode, ptsz);
}

}  // namespace

cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                          const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                          enum cudaStreamCaptureMode mode) {
    return begin_capture_to_graph(stream, graph, dependencies, numDependencies, mode, false);
}

cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t* dependencies,
                                               const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                               enum cudaStreamCaptureMode mode) {
    return begin_capture_to_graph(stream, graph, dependencies, numDependencies, mode, true);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
    return end_capture(stream, pGraph, false);
}

cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph) {
    return end_capture(stream, pGraph, true);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) {
    return is_capturing(stream, pCaptureStatus, false);
}

cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus) {
    return is_capturing(stream, pCaptureStatus, true);
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus* captureStatus_out,
                                     unsigned long long* id_out, cudaGraph_t* graph_out,
                                     const cudaGraphNode_t** dependencies_out, const cudaGraphEdgeData** edgeData_out,
                                     size_t* numDependencies_out) {
    return get_capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                            numDependencies_out, false);
}

cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus* captureStatus_out,
                                          unsigned long long* id_out, cudaGraph_t* graph_out,
                                          const cudaGraphNode_t** dependencies_out,
                                          const cudaGraphEdgeData** edgeData_out, size_t* numDependencies_out) {
    return get_capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                            numDependencies_out, true);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
    if (mode == nullptr || !is_valid_mode(*mode)) return fail(cudaErrorInvalidValue);
    cudaStreamCaptureMode previous = capture_mode;
    capture_mode = *mode;
    *mode = previous;
    return cudaSuccess;
}

// ---- graphs -------------------------------------------------------------------------------------

cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags) {
    if (pGraph == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
    auto graph = reinterpret_cast<cudaGraph_t>(new char);
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.graphs.insert(graph);
    *pGraph = graph;
    return cudaSuccess;
}

namespace {

cudaError_t instantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags,
                        cudaStream_t upload_stream) {
    constexpr unsigned long long known_flags = cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                               cudaGraphInstantiateFlagUpload | cudaGraphInstantiateFlagDeviceLaunch |
                                               cudaGraphInstantiateFlagUseNodePriority;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (pGraphExec == nullptr || s.graphs.count(graph) == 0 || (flags & ~known_flags) != 0) {
        return fail(cudaErrorInvalidValue);
    }
    if ((flags & cudaGraphInstantiateFlagUpload) != 0 && !is_valid_stream(s, upload_stream)) {
        return fail(cudaErrorInvalidResourceHandle);
    }
    auto exec = reinterpret_cast<cudaGraphExec_t>(new char);
    s.execs.insert(exec);
    *pGraphExec = exec;
    return cudaSuccess;
}

cudaError_t instantiate_with_params(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                    cudaGraphInstantiateParams* params) {
    if (params == nullptr) return fail(cudaErrorInvalidValue);
    cudaError_t error = instantiate(pGraphExec, graph, params->flags, params->uploadStream);
    params->errNode_out = nullptr;
    params->result_out = error == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
    return error;
}

cudaError_t graph_launch(cudaGraphExec_t graphExec, cudaStream_t stream, bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.execs.count(graphExec) == 0) return fail(cudaErrorInvalidValue);
    if (!is_valid_stream(s, stream)) return fail(cudaErrorInvalidResourceHandle);
    // Launching into a capturing stream is legal (it would add a child graph node); into an
    // invalidated capture it fails like any work on that stream.
    Capture* capture = capture_on(s, stream_key(stream, ptsz));
    if (capture != nullptr && capture->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
    ++s.graph_launches;
    return cudaSuccess;
}

}  // namespace

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
    return instantiate(pGraphExec, graph, flags, nullptr);
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
    return instantiate(pGraphExec, graph, flags, nullptr);
}

cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams* instantiateParams) {
    return instantiate_with_params(pGraphExec, graph, instantiateParams);
}

cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* instantiateParams) {
    return instantiate_with_params(pGraphExec, graph, instantiateParams);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
    return graph_launch(graphExec, stream, false);
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
    return graph_launch(graphExec, stream, true);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
    State& s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.execs.erase(graphExec) == 0) return fail(cudaErrorInvalidValue);
    }
    delete reinterpret_cast<char*>(graphExec);
    return cudaSuccess;
}

// Execs instantiated from the graph stay valid: they do not refer to it.
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    State& s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.graphs.count(graph) == 0) return fail(cudaErrorInvalidValue);
        // "All operations other than destroy and node removal are permitted on the graph while
        // the capture sequence is in progress" (cudaStreamGetCaptureInfo).
        for (const auto& entry : s.captures) {
            if (entry.second.graph == graph) return fail(cudaErrorIllegalState);
        }
        s.graphs.erase(graph);
    }
    delete reinterpret_cast<char*>(graph);
    return cudaSuccess;
}

// ---- events -------------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) {
    if (event == nullptr) return fail(cudaErrorInvalidValue);
    auto handle = reinterpret_cast<cudaEvent_t>(new char);
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.events[handle] = 0;
    *event = handle;
    return cudaSuccess;
}

// Flags are checked like the real runtime's (Default, BlockingSync, DisableTiming, Interprocess);
// they change nothing here: events never carry timing.
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    if ((flags & ~(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)) != 0) {
        return fail(cudaErrorInvalidValue);
    }
    return cudaEventCreate(event);
}

namespace {

cudaError_t event_record(cudaEvent_t event, cudaStream_t stream, bool ptsz) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.events.find(event);
    if (it == s.events.end() || !is_valid_stream(s, stream)) {
        return fail(cudaErrorInvalidResourceHandle);
    }
    Capture* capture = capture_on(s, stream_key(stream, ptsz));
    if (capture != nullptr && capture->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
    // Recorded in a capture, the event becomes a node of the graph.
    it->second = capture != nullptr ? capture->id : 0;
    return cudaSuccess;
}

}  // namespace

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) { return event_record(event, stream, false); }

cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) { return event_record(event, stream, true); }

// Work is synchronous, so an event is complete unless it was last recorded in a capture.
cudaError_t cudaEventQuery(cudaEvent_t event) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.events.find(event);
    if (it == s.events.end()) return fail(cudaErrorInvalidResourceHandle);
    if (it->second != 0) return fail(cudaErrorCapturedEvent);
    return cudaSuccess;
}

// Waits for the event: complete at once (synchronous work), except for an event last recorded in
// a capture, which never ran (cudaErrorCapturedEvent, like cudaEventQuery).
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.events.find(event);
    if (it == s.events.end()) return fail(cudaErrorInvalidResourceHandle);
    if (it->second != 0) return fail(cudaErrorCapturedEvent);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    State& s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.events.erase(event) == 0) return fail(cudaErrorInvalidResourceHandle);
    }
    delete reinterpret_cast<char*>(event);
    return cudaSuccess;
}

// ---- memory operations --------------------------------------------------------------------------

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
    if (count == 0) return cudaSuccess;
    State& s = state();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        auto address = reinterpret_cast<uintptr_t>(devPtr);
        auto it = s.blocks.upper_bound(address);
        if (it == s.blocks.begin()) return fail(cudaErrorInvalidValue);
        --it;
        const Block& block = it->second;
        if (block.kind == BlockKind::pinned || address - it->first > block.size ||
            count > block.size - (address - it->first)) {
            return fail(cudaErrorInvalidValue);
        }
    }
    std::memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
        return fail(cudaErrorInvalidMemcpyDirection);
    }
    if (count == 0) return cudaSuccess;
    if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
    std::memmove(dst, src, count);
    return cudaSuccess;
}

// ---- versions -----------------------------------------------------------------------------------

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
    if (runtimeVersion == nullptr) return fail(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
    if (driverVersion == nullptr) return fail(cudaErrorInvalidValue);
    *driverVersion = CUDART_VERSION;
    return cudaSuccess;
}

// ---- the driver behind the runtime ----------------------------------------------------------------
// As the real runtime does, the fake reaches the driver by dlopen("libcuda.so.1") and
// dlsym(handle, "cuGetProcAddress_v2"), and asks that for every other driver function, with its
// own CUDA version. cudaGetDriverEntryPoint* hand the caller's request to it. With
// FAKE_CUDART_VIA_DRIVER=1, cudaMalloc and cudaFree also go through the driver (cuMemAlloc_v2,
// cuMemFree_v2), as in the real runtime, instead of the fake's own blocks.
namespace {

using GetProcAddress = int (*)(const char*, void**, int, unsigned long long, int*);

GetProcAddress driver_lookup() {
    static GetProcAddress fn = [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        return lib ? reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2")) : nullptr;
    }();
    return fn;
}

bool via_driver() {
    static const bool on = [] {
        const char* v = std::getenv("FAKE_CUDART_VIA_DRIVER");
        return v != nullptr && std::strcmp(v, "1") == 0;
    }();
    return on;
}

void* driver_function(const char* name) {
    GetProcAddress lookup = driver_lookup();
    void* fn = nullptr;
    int status = 0;
    if (!lookup || lookup(name, &fn, CUDART_VERSION, 0, &status) != 0) return nullptr;
    return fn;
}

cudaError_t driver_malloc(void** devPtr, size_t size) {
    static auto fn = reinterpret_cast<int (*)(unsigned long long*, size_t)>(driver_function("cuMemAlloc"));
    if (!fn) return fail(cudaErrorInsufficientDriver);
    if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
    if (size == 0) {
        *devPtr = nullptr;
        return cudaSuccess;
    }
    unsigned long long p = 0;
    if (fn(&p, size) != 0) return fail(cudaErrorMemoryAllocation);
    *devPtr = reinterpret_cast<void*>(p);
    return cudaSuccess;
}

cudaError_t driver_free(void* devPtr) {
    static auto fn = reinterpret_cast<int (*)(unsigned long long)>(driver_function("cuMemFree"));
    if (!fn) return fail(cudaErrorInsufficientDriver);
    if (devPtr == nullptr) return cudaSuccess;
    return fn(reinterpret_cast<uintptr_t>(devPtr)) == 0 ? cudaSuccess : fail(cudaErrorInvalidValue);
}

// cudaEnableDefault selects the per-thread variants in the _ptsz entry points.
unsigned long long driver_flags(unsigned long long flags, bool ptsz_entry) {
    if (flags & cudaEnablePerThreadDefaultStream) return 2;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
    if (flags & cudaEnableLegacyStream) return 1;            // CU_GET_PROC_ADDRESS_LEGACY_STREAM
    return ptsz_entry ? 2 : 0;
}

cudaError_t entry_point(const char* symbol, void** funcPtr, int version, unsigned long long flags, bool ptsz_entry,
                        cudaDriverEntryPointQueryResult* driverStatus) {
    if (symbol == nullptr || funcPtr == nullptr) return fail(cudaErrorInvalidValue);
    if ((flags & ~3ull) != 0) return fail(cudaErrorInvalidValue);
    GetProcAddress lookup = driver_lookup();
    if (!lookup) return fail(cudaErrorInsufficientDriver);
    int status = 0;
    if (lookup(symbol, funcPtr, version, driver_flags(flags, ptsz_entry), &status) != 0) {
        *funcPtr = nullptr;
        return fail(cudaErrorInvalidValue);
    }
    if (driverStatus) *driverStatus = static_cast<cudaDriverEntryPointQueryResult>(status);
    return cudaSuccess;
}

}  // namespace

extern "C" cudaError_t cudaGetDriverEntryPoint_ptsz(const char*, void**, unsigned long long,
                                                    cudaDriverEntryPointQueryResult*);
extern "C" cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char*, void**, unsigned int, unsigned long long,
                                                             cudaDriverEntryPointQueryResult*);

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, false, driverStatus);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, true, driverStatus);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, static_cast<int>(cudaVersion), flags, false, driverStatus);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus) {
    return entry_point(symbol, funcPtr, static_cast<int>(cudaVersion), flags, true, driverStatus);
}

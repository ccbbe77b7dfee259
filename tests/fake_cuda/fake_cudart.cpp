// A fake CUDA runtime for tests: the allocation subset of libcudart.so.13, backed by host memory.
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

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

struct State {
    std::mutex mutex;
    std::map<uintptr_t, Block> blocks;  // by start address
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
};

// Default pools have no state; their handles are the addresses of these bytes.
char pool_tokens[k_max_devices];

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

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
        s->device_count = static_cast<int>(
            std::min<uint64_t>(env_u64("FAKE_CUDA_DEVICES", 1), k_max_devices));
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

// The common path of all seven allocating functions. `ptr` may be null (then the call fails with
// cudaErrorInvalidValue after being counted). `device` is ignored for pinned memory.
cudaError_t allocate(void** ptr, size_t size, BlockKind kind, int device,
                     cudaError_t size_zero_result) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (ptr != nullptr) *ptr = nullptr;
    if (cudaError_t injected = injected_failure(s); injected != cudaSuccess) return fail(injected);
    if (ptr == nullptr) return fail(cudaErrorInvalidValue);
    if (s.device_count == 0) return fail(cudaErrorNoDevice);
    if (size == 0) return size_zero_result == cudaSuccess ? cudaSuccess : fail(size_zero_result);
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
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
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

}  // extern "C"

// ---- allocation ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** devPtr, size_t size) {
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
    cudaError_t result =
        allocate(devPtr, rounded_width * height, BlockKind::device, current_device, cudaSuccess);
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

cudaError_t malloc_from_pool_async(void** ptr, size_t size, cudaMemPool_t memPool,
                                   cudaStream_t stream) {
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

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) {
    return malloc_from_pool_async(ptr, size, memPool, stream);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
    return allocate(ptr, size, BlockKind::pinned, -1, cudaSuccess);
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    constexpr unsigned int known_flags =
        cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
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
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream);
}

cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
    return malloc_async(devPtr, size, hStream);
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream) {
    return malloc_from_pool_async(ptr, size, memPool, stream);
}

// ---- free ---------------------------------------------------------------------------------------

cudaError_t cudaFree(void* devPtr) { return release(devPtr, FreeFamily::device, nullptr); }

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
    return release(devPtr, FreeFamily::device, &hStream);
}

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
    }
    delete reinterpret_cast<char*>(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return is_valid_stream(s, stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
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

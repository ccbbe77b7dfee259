// Shared by the test applications: the marker for functions the tests look for in recorded stacks,
// and the log the applications write to stdout, which the tests compare with the report.
//
// Log lines (one per event, fields separated by one space; addresses as 0x-prefixed hex):
//   alloc <api> <addr> <size> <stream|-> <device> <function>   a successful allocation
//   free <api> <addr> <stream|->                                a successful free
//   failed <api> <size> <error> <live_bytes> <device> <function>
//                       a failed allocation; live_bytes is the GPU memory the application
//                       itself has live on that device at that moment
//   result <label> <error>                                      the result of a checked call
//   info <key> <value>                                          anything else worth checking
//                       (handles and thread ids are logged as 0x-prefixed hex, see log_handle)
#pragma once

#include <cuda_runtime_api.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

// A function whose frames the tests look for in recorded stacks: never inlined, cloned or merged,
// and exported so that a symbolizer reading either .symtab or .dynsym finds it. The applications
// are also compiled with -fno-optimize-sibling-calls so that a call into CUDA is never a tail call.
#if defined(__clang__)
#define APP_FN extern "C" __attribute__((noinline, visibility("default")))
#else
#define APP_FN extern "C" __attribute__((noipa, visibility("default")))
#endif

// Exit status of an application whose own expectations failed (reason on stderr).
constexpr int k_app_check_failed = 90;

namespace app {

inline std::mutex& log_mutex() {
    static std::mutex mutex;
    return mutex;
}

/// Line-buffers stdout so that lines reach a pipe in order even across fork() and SIGKILL.
inline void init_log() { std::setvbuf(stdout, nullptr, _IOLBF, 0); }

[[noreturn]] inline void die(const char* what, cudaError_t got, cudaError_t want) {
    std::fprintf(stderr, "app check failed: %s returned %d, expected %d\n", what, static_cast<int>(got),
                 static_cast<int>(want));
    std::fflush(stdout);
    std::exit(k_app_check_failed);
}

/// Exits when `got` is not `want`, without logging (for hot loops).
inline void check(const char* label, cudaError_t got, cudaError_t want) {
    if (got != want) die(label, got, want);
}

/// Logs `result <label> <error>` and exits when `got` is not `want`.
inline void expect(const char* label, cudaError_t got, cudaError_t want) {
    {
        std::lock_guard<std::mutex> lock(log_mutex());
        std::printf("result %s %d\n", label, static_cast<int>(got));
    }
    if (got != want) die(label, got, want);
}

inline void print_stream(cudaStream_t stream, bool names_stream) {
    if (names_stream) {
        std::printf(" 0x%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(stream)));
    } else {
        std::printf(" -");
    }
}

/// Logs a successful allocation.
inline void log_alloc(const char* api, const void* ptr, size_t size, cudaStream_t stream, bool names_stream, int device,
                      const char* function) {
    std::lock_guard<std::mutex> lock(log_mutex());
    std::printf("alloc %s 0x%llx %zu", api, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)), size);
    print_stream(stream, names_stream);
    std::printf(" %d %s\n", device, function);
}

/// Logs a successful free.
inline void log_free(const char* api, const void* ptr, cudaStream_t stream, bool names_stream) {
    std::lock_guard<std::mutex> lock(log_mutex());
    std::printf("free %s 0x%llx", api, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)));
    print_stream(stream, names_stream);
    std::printf("\n");
}

/// Logs a failed allocation.
inline void log_failed(const char* api, size_t size, cudaError_t error, size_t live_bytes, int device,
                       const char* function) {
    std::lock_guard<std::mutex> lock(log_mutex());
    std::printf("failed %s %zu %d %zu %d %s\n", api, size, static_cast<int>(error), live_bytes, device, function);
}

inline void log_info(const char* key, unsigned long long value) {
    std::lock_guard<std::mutex> lock(log_mutex());
    std::printf("info %s %llu\n", key, value);
}

/// Logs `info <key> 0x<handle>`: a stream, graph or exec handle. In hex, so that
/// normalize_addresses() hides it when the output of two runs is compared.
inline void log_handle(const char* key, const void* handle) {
    std::lock_guard<std::mutex> lock(log_mutex());
    std::printf("info %s 0x%llx\n", key, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(handle)));
}

/// Logs `info <key> 0x<tid>`: the calling thread's kernel thread id (what memguard records), in
/// hex for the same reason.
inline void log_tid(const char* key) {
    std::lock_guard<std::mutex> lock(log_mutex());
    std::printf("info %s 0x%llx\n", key, static_cast<unsigned long long>(syscall(SYS_gettid)));
}

inline int current_device() {
    int device = -1;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess) die("cudaGetDevice", error, cudaSuccess);
    return device;
}

/// GPU bytes an application believes it has live, per device.
class LiveBytes {
public:
    void add(int device, size_t size) {
        std::lock_guard<std::mutex> lock(mutex_);
        bytes_[device] += size;
    }
    void remove(int device, size_t size) {
        std::lock_guard<std::mutex> lock(mutex_);
        bytes_[device] -= size;
    }
    size_t on(int device) {
        std::lock_guard<std::mutex> lock(mutex_);
        return bytes_[device];
    }

private:
    std::mutex mutex_;
    std::map<int, size_t> bytes_;
};

}  // namespace app

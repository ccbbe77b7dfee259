// Shared by the stream capture applications: small wrappers that make a call, log its result
// (app::expect) and what it returned, so that a run under memguard can be compared line by line
// with a run without it. Not for translation units compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM
// (the inline functions would call other entry points there).
#pragma once

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "capture_common.h calls the legacy default stream entry points"
#endif

#include "app_common.h"
#include "fake_cuda_control.h"

#include <thread>
#include <utility>

namespace app {

/// Sets the calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode) and
/// logs the mode it replaced as `info <label> <mode>`; returns that mode.
inline cudaStreamCaptureMode exchange_mode(const char* label, cudaStreamCaptureMode mode) {
    cudaStreamCaptureMode previous = mode;
    expect("cudaThreadExchangeStreamCaptureMode", cudaThreadExchangeStreamCaptureMode(&previous), cudaSuccess);
    log_info(label, static_cast<unsigned long long>(previous));
    return previous;
}

/// Logs `info <label> <status>`, the capture status of `stream` (cudaStreamIsCapturing).
inline cudaStreamCaptureStatus log_capture_status(const char* label, cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    expect("cudaStreamIsCapturing", cudaStreamIsCapturing(stream, &status), cudaSuccess);
    log_info(label, static_cast<unsigned long long>(status));
    return status;
}

/// Runs `fn` on a new thread and waits for it: "another thread" in the capture-mode rules.
template <typename Fn>
void on_another_thread(Fn&& fn) {
    std::thread thread(std::forward<Fn>(fn));
    thread.join();
}

/// Logs the fake runtime's own counts of captures, graphs, execs, launches and live memory.
inline void log_fake_counters() {
    log_info("fake_capture_count", fakecuda_capture_count());
    log_info("fake_graph_count", fakecuda_graph_count());
    log_info("fake_graph_exec_count", fakecuda_graph_exec_count());
    log_info("fake_graph_launch_count", fakecuda_graph_launch_count());
    log_info("fake_live_bytes", fakecuda_live_bytes());
    log_info("fake_live_pinned_bytes", fakecuda_live_pinned_bytes());
    log_info("fake_alloc_count", fakecuda_alloc_count());
}

}  // namespace app

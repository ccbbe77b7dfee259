// Potentially unsafe calls (cudaMalloc, cudaFree, cudaMallocHost, ...) during stream capture, under
// CUDA's capture interaction modes (cudaThreadExchangeStreamCaptureMode). One capture per step, on
// one stream; every call's result and the stream's capture status after it are logged:
//
//   1. global capture; the capturing thread (global mode) cudaMallocs k_unsafe_own: refused (900),
//      the capture is invalidated and ends with 901;
//   2. global capture; another thread (global mode) cudaMallocs k_unsafe_other: refused, 901;
//   3. k_unsafe_victim is cudaMalloc'ed between captures; global capture; the capturing thread, in
//      thread-local mode, cudaFrees it: refused, the block stays live, 901; freed afterwards;
//   4. global capture; the capturing thread cudaMallocHosts k_unsafe_host: refused, 901;
//   5. thread-local capture; another thread (global mode) cudaMallocs k_allowed_local and frees it:
//      allowed (other threads' thread-local captures do not matter), the capture succeeds;
//   6. relaxed capture; the capturing thread (global mode) cudaMallocs k_allowed_relaxed_own, and
//      another thread (global mode) cudaMallocs and frees k_allowed_relaxed_other: allowed;
//   7. global capture; a thread in relaxed mode and a thread in thread-local mode cudaMalloc and
//      free k_allowed_relaxed_mode and k_allowed_local_mode: allowed.
#include "app_sizes.h"
#include "capture_common.h"

using namespace app_sizes;

namespace {

cudaStream_t g_stream = nullptr;

}  // namespace

APP_FN void begin(cudaStreamCaptureMode mode) {
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(g_stream, mode), cudaSuccess);
}

// Ends the capture with `want`; destroys the graph of a successful one.
APP_FN void end(const char* label, cudaError_t want) {
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(uintptr_t{1});
    app::expect(label, cudaStreamEndCapture(g_stream, &graph), want);
    app::log_info("graph_is_null", graph == nullptr ? 1 : 0);
    if (graph != nullptr) app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    // A failed call is the thread's last error until read.
    if (want != cudaSuccess) app::expect("cudaGetLastError", cudaGetLastError(), want);
}

APP_FN void refused_malloc(const char* label, size_t size) {
    void* ptr = reinterpret_cast<void*>(uintptr_t{1});
    cudaError_t error = cudaMalloc(&ptr, size);
    app::expect(label, error, cudaErrorStreamCaptureUnsupported);
    app::log_failed("cudaMalloc", size, error, 0, app::current_device(), __func__);
    app::log_info("refused_ptr_is_null", ptr == nullptr ? 1 : 0);
}

APP_FN void refused_malloc_host(size_t size) {
    void* ptr = nullptr;
    cudaError_t error = cudaMallocHost(&ptr, size);
    app::expect("cudaMallocHost(capturing)", error, cudaErrorStreamCaptureUnsupported);
    app::log_failed("cudaMallocHost", size, error, 0, -1, __func__);
}

APP_FN void* alloc_victim(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    return ptr;
}

APP_FN void* allowed_malloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc(allowed)", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    return ptr;
}

void free_device(void* ptr) {
    app::expect("cudaFree", cudaFree(ptr), cudaSuccess);
    app::log_free("cudaFree", ptr, nullptr, false);
}

// A thread that allocates and frees one block during another thread's capture, in `mode`.
APP_FN void allowed_on_another_thread(const char* tid_key, cudaStreamCaptureMode mode, size_t size) {
    app::on_another_thread([=] {
        app::log_tid(tid_key);
        if (mode != cudaStreamCaptureModeGlobal) app::exchange_mode("helper_previous_mode", mode);
        free_device(allowed_malloc(size));
    });
}

int main() {
    app::init_log();
    app::log_tid("tid_main");
    app::expect("cudaStreamCreate", cudaStreamCreate(&g_stream), cudaSuccess);
    app::log_handle("stream", g_stream);

    // 1. The capturing thread, global mode.
    begin(cudaStreamCaptureModeGlobal);
    refused_malloc("cudaMalloc(own capture)", k_unsafe_own);
    app::log_capture_status("status_1", g_stream);
    end("cudaStreamEndCapture(1)", cudaErrorStreamCaptureInvalidated);
    app::log_capture_status("status_1_ended", g_stream);

    // 2. Another thread, global mode.
    begin(cudaStreamCaptureModeGlobal);
    app::on_another_thread([] {
        app::log_tid("tid_other");
        refused_malloc("cudaMalloc(other thread)", k_unsafe_other);
    });
    app::log_capture_status("status_2", g_stream);
    end("cudaStreamEndCapture(2)", cudaErrorStreamCaptureInvalidated);

    // 3. The capturing thread in thread-local mode frees a block: refused, the block stays live.
    void* victim = alloc_victim(k_unsafe_victim);
    begin(cudaStreamCaptureModeGlobal);
    app::exchange_mode("mode_before_free", cudaStreamCaptureModeThreadLocal);
    app::expect("cudaFree(own capture)", cudaFree(victim), cudaErrorStreamCaptureUnsupported);
    app::exchange_mode("mode_after_free", cudaStreamCaptureModeGlobal);
    app::log_capture_status("status_3", g_stream);
    end("cudaStreamEndCapture(3)", cudaErrorStreamCaptureInvalidated);
    free_device(victim);

    // 4. Pinned host memory is potentially unsafe too.
    begin(cudaStreamCaptureModeGlobal);
    refused_malloc_host(k_unsafe_host);
    app::log_capture_status("status_4", g_stream);
    end("cudaStreamEndCapture(4)", cudaErrorStreamCaptureInvalidated);

    // 5. A thread-local capture does not restrict other threads.
    begin(cudaStreamCaptureModeThreadLocal);
    allowed_on_another_thread("tid_local_helper", cudaStreamCaptureModeGlobal, k_allowed_local);
    app::log_capture_status("status_5", g_stream);
    end("cudaStreamEndCapture(5)", cudaSuccess);

    // 6. A relaxed capture restricts nobody; the capturing thread's block is the capture's.
    begin(cudaStreamCaptureModeRelaxed);
    void* own = allowed_malloc(k_allowed_relaxed_own);
    allowed_on_another_thread("tid_relaxed_helper", cudaStreamCaptureModeGlobal, k_allowed_relaxed_other);
    app::log_capture_status("status_6", g_stream);
    end("cudaStreamEndCapture(6)", cudaSuccess);
    free_device(own);

    // 7. A global capture does not restrict threads in relaxed or thread-local mode.
    begin(cudaStreamCaptureModeGlobal);
    allowed_on_another_thread("tid_relaxed_mode", cudaStreamCaptureModeRelaxed, k_allowed_relaxed_mode);
    allowed_on_another_thread("tid_local_mode", cudaStreamCaptureModeThreadLocal, k_allowed_local_mode);
    app::log_capture_status("status_7", g_stream);
    end("cudaStreamEndCapture(7)", cudaSuccess);

    app::expect("cudaStreamDestroy", cudaStreamDestroy(g_stream), cudaSuccess);
    app::log_fake_counters();
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

// Stream capture and graph calls that the runtime refuses, and captures that cross threads.
//
//   capture_misuse errors
//       ending a capture that was never begun, capturing the legacy stream, an invalid mode,
//       beginning twice, the legacy stream queried during a capture, an event recorded in a
//       capture, a synchronize that invalidates a capture, destroyed execs and graphs used again,
//       invalid instantiate flags, invalid interaction modes, destroying the graph a capture goes
//       into. Three captures succeed in beginning: a global one (invalidated), a thread-local one
//       and a global one into a cudaGraphCreate graph.
//   capture_misuse wrong_thread
//       a global and a thread-local capture that another thread tries to end (refused with
//       cudaErrorStreamCaptureWrongThread; the capture goes on: the capturing thread then gives it
//       a pool segment, k_wrong_thread_segment, in relaxed mode, ends it and replays its graph),
//       and a relaxed capture that another thread ends.
//   capture_misuse per_thread_streams
//       two threads capture their own per-thread default stream (cudaStreamPerThread) at the same
//       time, in thread-local mode, and allocate on it (k_per_thread_a, k_per_thread_b); thread B
//       begins after A and ends before A.
#include "app_sizes.h"
#include "capture_common.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

using namespace app_sizes;

namespace {

void log_status_and_sequence(const char* label, cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long sequence = 0;
    cudaGraph_t graph = nullptr;
    app::expect("cudaStreamGetCaptureInfo", cudaStreamGetCaptureInfo(stream, &status, &sequence, &graph), cudaSuccess);
    std::string key = label;
    app::log_info((key + "_status").c_str(), status);
    app::log_info((key + "_sequence").c_str(), sequence);
    app::log_info((key + "_has_graph").c_str(), graph != nullptr ? 1 : 0);
}

// Expects `error` and that it is the thread's last error, and clears it.
void expect_failure(const char* label, cudaError_t got, cudaError_t want) {
    app::expect(label, got, want);
    app::expect("cudaGetLastError", cudaGetLastError(), want);
}

}  // namespace

APP_FN void refused_captures(cudaStream_t stream) {
    cudaGraph_t graph = nullptr;
    expect_failure("cudaStreamEndCapture(not capturing)", cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState);
    expect_failure("cudaStreamBeginCapture(null stream)", cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
                   cudaErrorStreamCaptureUnsupported);
    expect_failure("cudaStreamBeginCapture(cudaStreamLegacy)",
                   cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeRelaxed),
                   cudaErrorStreamCaptureUnsupported);
    expect_failure("cudaStreamBeginCapture(bad mode)",
                   cudaStreamBeginCapture(stream, static_cast<cudaStreamCaptureMode>(7)), cudaErrorInvalidValue);
    app::log_capture_status("status_after_refusals", stream);
}

// Capture 1 (global): begun twice, queried, an event recorded in it, then invalidated by a
// synchronize of the capturing stream.
APP_FN void invalidated_capture(cudaStream_t stream, cudaStream_t other) {
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    expect_failure("cudaStreamBeginCapture(again)", cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
                   cudaErrorIllegalState);
    log_status_and_sequence("capture1", stream);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    expect_failure("cudaStreamIsCapturing(legacy)", cudaStreamIsCapturing(cudaStreamLegacy, &status),
                   cudaErrorStreamCaptureImplicit);
    app::log_capture_status("other_stream_status", other);

    cudaEvent_t event = nullptr;
    app::expect("cudaEventCreate", cudaEventCreate(&event), cudaSuccess);
    app::expect("cudaEventRecord(capturing)", cudaEventRecord(event, stream), cudaSuccess);
    expect_failure("cudaEventQuery(captured)", cudaEventQuery(event), cudaErrorCapturedEvent);

    expect_failure("cudaStreamSynchronize(capturing)", cudaStreamSynchronize(stream),
                   cudaErrorStreamCaptureUnsupported);
    log_status_and_sequence("capture1_invalidated", stream);
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(uintptr_t{1});
    expect_failure("cudaStreamEndCapture(invalidated)", cudaStreamEndCapture(stream, &graph),
                   cudaErrorStreamCaptureInvalidated);
    app::log_info("invalidated_graph_is_null", graph == nullptr ? 1 : 0);
    app::log_capture_status("status_after_invalidated", stream);

    app::expect("cudaEventRecord", cudaEventRecord(event, other), cudaSuccess);
    app::expect("cudaEventQuery", cudaEventQuery(event), cudaSuccess);
    app::expect("cudaEventDestroy", cudaEventDestroy(event), cudaSuccess);
    expect_failure("cudaEventDestroy(again)", cudaEventDestroy(event), cudaErrorInvalidResourceHandle);
}

// Capture 2 (thread-local): its graph and exec used after they are destroyed.
APP_FN void destroyed_handles(cudaStream_t stream) {
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                cudaSuccess);
    log_status_and_sequence("capture2", stream);
    cudaGraph_t graph = nullptr;
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(stream, &graph), cudaSuccess);
    app::log_handle("graph2", graph);
    cudaGraphExec_t exec = nullptr, refused = nullptr;
    app::expect("cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    app::log_handle("exec2", exec);
    expect_failure("cudaGraphInstantiate(bad flags)", cudaGraphInstantiate(&refused, graph, 1ull << 40),
                   cudaErrorInvalidValue);
    expect_failure("cudaGraphInstantiateWithParams(null params)",
                   cudaGraphInstantiateWithParams(&refused, graph, nullptr), cudaErrorInvalidValue);
    app::expect("cudaGraphLaunch", cudaGraphLaunch(exec, stream), cudaSuccess);
    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec), cudaSuccess);
    expect_failure("cudaGraphLaunch(destroyed exec)", cudaGraphLaunch(exec, stream), cudaErrorInvalidValue);
    expect_failure("cudaGraphExecDestroy(again)", cudaGraphExecDestroy(exec), cudaErrorInvalidValue);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    expect_failure("cudaGraphDestroy(again)", cudaGraphDestroy(graph), cudaErrorInvalidValue);
    expect_failure("cudaGraphInstantiate(destroyed graph)", cudaGraphInstantiate(&refused, graph, 0),
                   cudaErrorInvalidValue);
}

APP_FN void refused_modes() {
    expect_failure("cudaThreadExchangeStreamCaptureMode(null)", cudaThreadExchangeStreamCaptureMode(nullptr),
                   cudaErrorInvalidValue);
    auto bad = static_cast<cudaStreamCaptureMode>(9);
    expect_failure("cudaThreadExchangeStreamCaptureMode(bad mode)", cudaThreadExchangeStreamCaptureMode(&bad),
                   cudaErrorInvalidValue);
    app::log_info("bad_mode_left", static_cast<unsigned long long>(bad));
    // The thread's mode is unchanged: still global.
    app::exchange_mode("mode_after_refusals", cudaStreamCaptureModeRelaxed);
    app::exchange_mode("mode_restored", cudaStreamCaptureModeGlobal);
}

// Capture 3 (global) into a graph made by cudaGraphCreate, which may not be destroyed meanwhile.
APP_FN void capture_into_graph(cudaStream_t stream) {
    cudaGraph_t graph = nullptr;
    expect_failure("cudaGraphCreate(bad flags)", cudaGraphCreate(&graph, 1), cudaErrorInvalidValue);
    app::expect("cudaGraphCreate", cudaGraphCreate(&graph, 0), cudaSuccess);
    app::log_handle("graph3", graph);
    expect_failure("cudaStreamBeginCaptureToGraph(null graph)",
                   cudaStreamBeginCaptureToGraph(stream, nullptr, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal),
                   cudaErrorInvalidValue);
    app::expect("cudaStreamBeginCaptureToGraph",
                cudaStreamBeginCaptureToGraph(stream, graph, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal),
                cudaSuccess);
    expect_failure("cudaGraphDestroy(capturing into)", cudaGraphDestroy(graph), cudaErrorIllegalState);
    cudaGraph_t ended = nullptr;
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(stream, &ended), cudaSuccess);
    app::log_info("ended_is_target", ended == graph ? 1 : 0);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
}

void errors() {
    cudaStream_t stream = nullptr, other = nullptr;
    app::expect("cudaStreamCreate", cudaStreamCreate(&stream), cudaSuccess);
    app::expect("cudaStreamCreate", cudaStreamCreate(&other), cudaSuccess);
    app::log_handle("stream", stream);
    refused_captures(stream);
    invalidated_capture(stream, other);
    destroyed_handles(stream);
    refused_modes();
    capture_into_graph(stream);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(stream), cudaSuccess);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(other), cudaSuccess);
}

// ---- wrong_thread --------------------------------------------------------------------------------

APP_FN void* pool_segment(size_t size) {
    app::exchange_mode("mode_before_pool", cudaStreamCaptureModeRelaxed);
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    app::exchange_mode("mode_in_pool", cudaStreamCaptureModeGlobal);
    return ptr;
}

// Another thread tries to end the capture on `stream`; returns what it got.
APP_FN cudaError_t end_from_another_thread(cudaStream_t stream, cudaGraph_t* graph) {
    cudaError_t error = cudaSuccess;
    app::on_another_thread([&] {
        app::log_tid("tid_ender");
        error = cudaStreamEndCapture(stream, graph);
        cudaGetLastError();
    });
    return error;
}

void wrong_thread() {
    app::log_tid("tid_main");
    cudaStream_t stream = nullptr;
    app::expect("cudaStreamCreate", cudaStreamCreate(&stream), cudaSuccess);
    app::log_handle("stream", stream);

    // Global: refused from another thread; the capture goes on.
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    cudaGraph_t graph = nullptr;
    app::expect("cudaStreamEndCapture(other thread, global)", end_from_another_thread(stream, &graph),
                cudaErrorStreamCaptureWrongThread);
    app::log_capture_status("global_status_after_refusal", stream);
    void* segment = pool_segment(k_wrong_thread_segment);
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(stream, &graph), cudaSuccess);
    app::log_handle("global_graph", graph);
    cudaGraphExec_t exec = nullptr;
    app::expect("cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    app::log_handle("exec", exec);
    app::expect("cudaGraphLaunch", cudaGraphLaunch(exec, stream), cudaSuccess);
    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec), cudaSuccess);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    app::expect("cudaFree", cudaFree(segment), cudaSuccess);
    app::log_free("cudaFree", segment, nullptr, false);

    // Thread-local: the same.
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                cudaSuccess);
    app::expect("cudaStreamEndCapture(other thread, thread_local)", end_from_another_thread(stream, &graph),
                cudaErrorStreamCaptureWrongThread);
    app::log_capture_status("local_status_after_refusal", stream);
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(stream, &graph), cudaSuccess);
    app::log_handle("local_graph", graph);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);

    // Relaxed: any thread may end it.
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
    app::expect("cudaStreamEndCapture(other thread, relaxed)", end_from_another_thread(stream, &graph), cudaSuccess);
    app::log_handle("relaxed_graph", graph);
    app::log_capture_status("relaxed_status_after_end", stream);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(stream), cudaSuccess);
}

// ---- per_thread_streams --------------------------------------------------------------------------

namespace {

// Steps of the two threads, in order: A begins, B begins, B allocates and ends, A allocates and
// ends.
std::mutex g_step_mutex;
std::condition_variable g_step_changed;
int g_step = 0;

void wait_for_step(int step) {
    std::unique_lock<std::mutex> lock(g_step_mutex);
    g_step_changed.wait(lock, [&] { return g_step >= step; });
}

void set_step(int step) {
    {
        std::lock_guard<std::mutex> lock(g_step_mutex);
        g_step = step;
    }
    g_step_changed.notify_all();
}

}  // namespace

APP_FN void* per_thread_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, size, cudaStreamPerThread), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, cudaStreamPerThread, true, app::current_device(), __func__);
    return ptr;
}

// Captures this thread's per-thread default stream between `begin_step` and `end_step`.
APP_FN void per_thread_capture(const char* name, int begin_step, int alloc_step, size_t size, void** block,
                               cudaGraph_t* graph) {
    wait_for_step(begin_step);
    app::log_tid((std::string("tid_") + name).c_str());
    app::expect("cudaStreamBeginCapture(per-thread)",
                cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    set_step(begin_step + 1);
    wait_for_step(alloc_step);
    *block = per_thread_alloc(size);
    app::expect("cudaStreamEndCapture(per-thread)", cudaStreamEndCapture(cudaStreamPerThread, graph), cudaSuccess);
    app::log_handle((std::string("graph_") + name).c_str(), *graph);
    set_step(alloc_step + 1);
}

void per_thread_streams() {
    void* block_a = nullptr;
    void* block_b = nullptr;
    cudaGraph_t graph_a = nullptr, graph_b = nullptr;
    // A: begins at 0, allocates at 3. B: begins at 1, allocates at 2.
    std::thread a([&] { per_thread_capture("a", 0, 3, k_per_thread_a, &block_a, &graph_a); });
    std::thread b([&] { per_thread_capture("b", 1, 2, k_per_thread_b, &block_b, &graph_b); });
    a.join();
    b.join();
    app::log_info("distinct_graphs", graph_a != graph_b ? 1 : 0);
    for (cudaGraph_t graph : {graph_a, graph_b}) {
        app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    }
    for (void* block : {block_a, block_b}) {
        app::expect("cudaFree", cudaFree(block), cudaSuccess);
        app::log_free("cudaFree", block, nullptr, false);
    }
}

int main(int argc, char** argv) {
    app::init_log();
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "errors") {
        errors();
    } else if (mode == "wrong_thread") {
        wrong_thread();
    } else if (mode == "per_thread_streams") {
        per_thread_streams();
    } else {
        std::fprintf(stderr, "usage: capture_misuse errors|wrong_thread|per_thread_streams\n");
        return 2;
    }
    app::log_fake_counters();
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

// A stream capture whose graph gets a private memory pool, the way PyTorch's CUDA graphs use one,
// then two execs of the graph replayed and destroyed.
//
//   graph_pool <scenario> [ptsz]
//
// Every scenario begins a global-mode capture on a new stream, makes its allocations, ends the
// capture, instantiates two execs (cudaGraphInstantiate, cudaGraphInstantiateWithParams), launches
// the first k_exec1_launches and the second k_exec2_launches times, destroys the first exec, then
// the graph, launches the second exec once more (an exec outlives its graph), destroys it, and
// finally frees its blocks. Scenarios:
//
//   same_thread         the capturing thread switches itself to relaxed mode
//                       (cudaThreadExchangeStreamCaptureMode, as PyTorch's caching allocator
//                       does), cudaMallocs the pool segment (k_pool_segment) and switches back;
//   other_thread        another thread does the same: the segment is not the capture's;
//   async_other_thread  another thread (global mode) allocates stream-ordered memory on the
//                       capturing stream (k_graph_async) and on a stream that is not capturing
//                       (k_graph_async_side);
//   to_graph            as same_thread, capturing into a graph made by cudaGraphCreate
//                       (cudaStreamBeginCaptureToGraph).
//
// With `ptsz`, the capture, cudaGraphInstantiateWithParams and launch calls go through the
// per-thread default stream entry points (graph_pool_ptsz.cpp). Handles and thread ids are logged
// (info ... 0x...) so that the tests can find them in the report.
#include "app_sizes.h"
#include "capture_common.h"
#include "graph_pool_calls.h"

#include <cstring>
#include <string>

using namespace app_sizes;

#define CAPTURE_CALLS_FUNCTION legacy_capture_calls
#define CAPTURE_CALLS_NAME "legacy"
#include "graph_pool_calls.inc"

// PyTorch's way: switch to relaxed mode, cudaMalloc a segment for the graph's private pool,
// switch back.
APP_FN void* grow_private_pool(size_t size) {
    app::exchange_mode("mode_before_pool", cudaStreamCaptureModeRelaxed);
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    app::exchange_mode("mode_in_pool", cudaStreamCaptureModeGlobal);
    return ptr;
}

// The same, from a thread that did not begin the capture.
APP_FN void* helper_grow_private_pool(size_t size) {
    app::log_tid("tid_helper");
    app::exchange_mode("helper_mode_before_pool", cudaStreamCaptureModeRelaxed);
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    app::exchange_mode("helper_mode_in_pool", cudaStreamCaptureModeGlobal);
    return ptr;
}

APP_FN void* helper_alloc_async(size_t size, cudaStream_t stream) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, size, stream), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void replay(const CaptureCalls& calls, cudaGraphExec_t exec, int times, cudaStream_t stream) {
    for (int i = 0; i < times; ++i) app::expect("cudaGraphLaunch", calls.launch(exec, stream), cudaSuccess);
}

void free_device(void* ptr) {
    app::expect("cudaFree", cudaFree(ptr), cudaSuccess);
    app::log_free("cudaFree", ptr, nullptr, false);
}

void free_async(void* ptr, cudaStream_t stream) {
    app::expect("cudaFreeAsync", cudaFreeAsync(ptr, stream), cudaSuccess);
    app::log_free("cudaFreeAsync", ptr, stream, true);
}

int main(int argc, char** argv) {
    app::init_log();
    const std::string scenario = argc > 1 ? argv[1] : "";
    const bool ptsz = argc > 2 && std::strcmp(argv[2], "ptsz") == 0;
    if (scenario != "same_thread" && scenario != "other_thread" && scenario != "async_other_thread" &&
        scenario != "to_graph") {
        std::fprintf(stderr, "usage: graph_pool same_thread|other_thread|async_other_thread|to_graph [ptsz]\n");
        return 2;
    }
    const CaptureCalls& calls = ptsz ? ptsz_capture_calls() : legacy_capture_calls();
    app::log_tid("tid_main");

    cudaStream_t stream = nullptr, side = nullptr;
    app::expect("cudaStreamCreate", cudaStreamCreate(&stream), cudaSuccess);
    app::expect("cudaStreamCreate", cudaStreamCreate(&side), cudaSuccess);
    app::log_handle("stream", stream);
    app::log_handle("side_stream", side);

    cudaGraph_t target = nullptr;
    if (scenario == "to_graph") {
        app::expect("cudaGraphCreate", cudaGraphCreate(&target, 0), cudaSuccess);
        app::log_handle("target_graph", target);
        app::expect("cudaStreamBeginCaptureToGraph",
                    calls.begin_capture_to_graph(stream, target, cudaStreamCaptureModeGlobal), cudaSuccess);
    } else {
        app::expect("cudaStreamBeginCapture", calls.begin_capture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    }
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long sequence = 0;
    cudaGraph_t capturing = nullptr;
    app::expect("cudaStreamGetCaptureInfo", calls.get_capture_info(stream, &status, &sequence, &capturing),
                cudaSuccess);
    app::log_info("status_in_capture", status);
    app::log_info("capture_sequence", sequence);
    app::log_handle("capturing_graph", capturing);

    void* segment = nullptr;
    void* async = nullptr;
    void* async_side = nullptr;
    if (scenario == "same_thread" || scenario == "to_graph") {
        segment = grow_private_pool(k_pool_segment);
    } else if (scenario == "other_thread") {
        app::on_another_thread([&] { segment = helper_grow_private_pool(k_pool_segment); });
    } else {
        app::on_another_thread([&] {
            app::log_tid("tid_helper");
            async = helper_alloc_async(k_graph_async, stream);
            async_side = helper_alloc_async(k_graph_async_side, side);
        });
    }

    cudaGraph_t graph = nullptr;
    app::expect("cudaStreamEndCapture", calls.end_capture(stream, &graph), cudaSuccess);
    app::log_handle("graph", graph);
    if (graph == nullptr || (target != nullptr && graph != target) || graph != capturing) {
        app::die("cudaStreamEndCapture returned another graph", cudaErrorUnknown, cudaSuccess);
    }
    app::log_capture_status("status_after_capture", stream);

    cudaGraphExec_t exec1 = nullptr, exec2 = nullptr;
    app::expect("cudaGraphInstantiate", cudaGraphInstantiate(&exec1, graph, 0), cudaSuccess);
    app::log_handle("exec1", exec1);
    cudaGraphInstantiateParams params = {};
    params.result_out = cudaGraphInstantiateError;
    app::expect("cudaGraphInstantiateWithParams", calls.instantiate_with_params(&exec2, graph, &params), cudaSuccess);
    app::log_handle("exec2", exec2);
    app::log_info("instantiate_result", params.result_out);

    replay(calls, exec1, k_exec1_launches, stream);
    replay(calls, exec2, k_exec2_launches, stream);
    app::expect("cudaStreamSynchronize", cudaStreamSynchronize(stream), cudaSuccess);

    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec1), cudaSuccess);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    // The exec outlives its graph and still launches.
    app::expect("cudaGraphLaunch", calls.launch(exec2, stream), cudaSuccess);
    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec2), cudaSuccess);

    if (segment != nullptr) free_device(segment);
    if (async != nullptr) free_async(async, stream);
    if (async_side != nullptr) free_async(async_side, side);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(stream), cudaSuccess);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(side), cudaSuccess);
    app::log_fake_counters();
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

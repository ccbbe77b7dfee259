// More stream captures in progress at once than memguard has room for (k_capture_slots): the
// program's calls must behave exactly as without memguard.
//
// k_many_captures + 1 streams; a global-mode capture begins on the first k_many_captures of them,
// each queried with cudaStreamGetCaptureInfo and given a stream-ordered block
// (many_capture_size(i)) on its stream; a relaxed-mode cudaMalloc is made; all the captures end (in
// order), the graphs of the first and the last capture are instantiated and launched twice; after
// that, one more capture runs on the last stream. Everything is destroyed and freed.
#include "app_sizes.h"
#include "capture_common.h"

#include <string>
#include <vector>

using namespace app_sizes;

APP_FN void* capture_alloc(size_t size, cudaStream_t stream) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, size, stream), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void launch_twice(cudaGraph_t graph, cudaStream_t stream, const char* key) {
    cudaGraphExec_t exec = nullptr;
    app::expect("cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    app::log_handle(key, exec);
    app::expect("cudaGraphLaunch", cudaGraphLaunch(exec, stream), cudaSuccess);
    app::expect("cudaGraphLaunch", cudaGraphLaunch(exec, stream), cudaSuccess);
    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec), cudaSuccess);
}

int main() {
    app::init_log();
    app::log_tid("tid_main");
    std::vector<cudaStream_t> streams(k_many_captures + 1);
    for (size_t i = 0; i < streams.size(); ++i) {
        app::expect("cudaStreamCreate", cudaStreamCreate(&streams[i]), cudaSuccess);
        app::log_handle(("stream_" + std::to_string(i)).c_str(), streams[i]);
    }

    std::vector<void*> blocks;
    for (int i = 0; i < k_many_captures; ++i) {
        cudaStream_t stream = streams[static_cast<size_t>(i)];
        app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        unsigned long long sequence = 0;
        app::expect("cudaStreamGetCaptureInfo", cudaStreamGetCaptureInfo(stream, &status, &sequence), cudaSuccess);
        app::log_info("status", status);
        app::log_info("sequence", sequence);
    }
    app::log_info("fake_captures_in_progress", fakecuda_capture_count());
    for (int i = 0; i < k_many_captures; ++i) {
        blocks.push_back(capture_alloc(many_capture_size(i), streams[static_cast<size_t>(i)]));
    }
    app::exchange_mode("mode_before_pool", cudaStreamCaptureModeRelaxed);
    void* segment = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&segment, k_pool_segment), cudaSuccess);
    app::log_alloc("cudaMalloc", segment, k_pool_segment, nullptr, false, app::current_device(), "main");
    app::exchange_mode("mode_in_pool", cudaStreamCaptureModeGlobal);

    std::vector<cudaGraph_t> graphs(k_many_captures);
    for (int i = 0; i < k_many_captures; ++i) {
        auto index = static_cast<size_t>(i);
        app::expect("cudaStreamEndCapture", cudaStreamEndCapture(streams[index], &graphs[index]), cudaSuccess);
        app::log_handle(("graph_" + std::to_string(i)).c_str(), graphs[index]);
    }
    launch_twice(graphs.front(), streams.front(), "exec_first");
    launch_twice(graphs.back(), streams[k_many_captures - 1], "exec_last");

    // Room again: one more capture, on the stream that never captured.
    cudaStream_t last = streams.back();
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(last, cudaStreamCaptureModeGlobal), cudaSuccess);
    cudaGraph_t extra = nullptr;
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(last, &extra), cudaSuccess);
    app::log_handle("graph_extra", extra);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(extra), cudaSuccess);

    for (cudaGraph_t graph : graphs) app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    for (size_t i = 0; i < blocks.size(); ++i) {
        app::expect("cudaFreeAsync", cudaFreeAsync(blocks[i], streams[i]), cudaSuccess);
        app::log_free("cudaFreeAsync", blocks[i], streams[i], true);
    }
    app::expect("cudaFree", cudaFree(segment), cudaSuccess);
    app::log_free("cudaFree", segment, nullptr, false);
    for (cudaStream_t stream : streams) app::expect("cudaStreamDestroy", cudaStreamDestroy(stream), cudaSuccess);
    app::log_fake_counters();
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

// Freeing a capture's memory while a graph exec made from it is alive: a later allocation or
// capture can be given memory the graph still uses on replay.
//
// A global-mode capture on a new stream gets two pool segments (cudaMalloc in relaxed mode,
// k_flg_owned_a and k_flg_owned_b) and a stream-ordered block on the capturing stream
// (k_flg_async); two execs are instantiated and launched once each, and a block that is no
// capture's (k_flg_plain) is allocated after the capture. Then, in this order:
//   cudaFree(k_flg_owned_a)           both execs alive: a hazard
//   cudaFree(k_flg_plain)             no capture's block: no hazard
//   cudaGraphExecDestroy(exec1)
//   cudaFreeAsync(k_flg_async)        exec2 alive: a hazard naming exec2
//   cudaGraphExecDestroy(exec2)
//   cudaFree(k_flg_owned_b)           only the graph is left: no hazard
//   cudaGraphDestroy(graph)
#include "app_sizes.h"
#include "capture_common.h"

using namespace app_sizes;

APP_FN void* pool_segment(size_t size) {
    app::exchange_mode("mode_before_pool", cudaStreamCaptureModeRelaxed);
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    app::exchange_mode("mode_in_pool", cudaStreamCaptureModeGlobal);
    return ptr;
}

APP_FN void* graph_alloc_async(size_t size, cudaStream_t stream) {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, size, stream), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, size, stream, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void* plain_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
    return ptr;
}

APP_FN void free_device(void* ptr) {
    app::expect("cudaFree", cudaFree(ptr), cudaSuccess);
    app::log_free("cudaFree", ptr, nullptr, false);
}

APP_FN void free_async(void* ptr, cudaStream_t stream) {
    app::expect("cudaFreeAsync", cudaFreeAsync(ptr, stream), cudaSuccess);
    app::log_free("cudaFreeAsync", ptr, stream, true);
}

int main() {
    app::init_log();
    app::log_tid("tid_main");
    cudaStream_t stream = nullptr;
    app::expect("cudaStreamCreate", cudaStreamCreate(&stream), cudaSuccess);
    app::log_handle("stream", stream);

    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    void* owned_a = pool_segment(k_flg_owned_a);
    void* owned_b = pool_segment(k_flg_owned_b);
    void* async = graph_alloc_async(k_flg_async, stream);
    cudaGraph_t graph = nullptr;
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(stream, &graph), cudaSuccess);
    app::log_handle("graph", graph);

    cudaGraphExec_t exec1 = nullptr, exec2 = nullptr;
    app::expect("cudaGraphInstantiate", cudaGraphInstantiate(&exec1, graph, 0), cudaSuccess);
    app::expect("cudaGraphInstantiateWithFlags",
                cudaGraphInstantiateWithFlags(&exec2, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch), cudaSuccess);
    app::log_handle("exec1", exec1);
    app::log_handle("exec2", exec2);
    app::expect("cudaGraphLaunch", cudaGraphLaunch(exec1, stream), cudaSuccess);
    app::expect("cudaGraphLaunch", cudaGraphLaunch(exec2, stream), cudaSuccess);
    void* plain = plain_alloc(k_flg_plain);

    free_device(owned_a);
    free_device(plain);
    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec1), cudaSuccess);
    free_async(async, stream);
    app::expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec2), cudaSuccess);
    free_device(owned_b);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);

    app::expect("cudaStreamDestroy", cudaStreamDestroy(stream), cudaSuccess);
    app::log_fake_counters();
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

// Warm-up retention: memory a program allocated while warming up (outside any capture) and still
// holds when it begins capturing a graph.
//
// Warm-up: warmup_outputs() allocates k_warmup_outputs blocks (warmup_output_size(i)) at one call
// site and the even ones are kept; warmup_scratch() allocates and frees k_warmup_scratch;
// warmup_pinned() keeps k_warmup_pinned of pinned host memory; warmup_async() keeps k_warmup_async
// of stream-ordered memory on a side stream. Then a first global-mode capture on the main stream,
// whose pool segment (k_capture1_pool, relaxed-mode cudaMalloc) is the capture's own. After it
// ends, second_warmup() allocates k_second_kept and k_second_freed at one call site and frees the
// second; then a second capture (pool segment k_capture2_pool). Everything is freed at the end.
#include "app_sizes.h"
#include "capture_common.h"

#include <vector>

using namespace app_sizes;

namespace {

cudaStream_t g_stream = nullptr;
cudaStream_t g_side = nullptr;

void* device_alloc(size_t size, const char* function) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), function);
    return ptr;
}

void free_device(void* ptr) {
    app::expect("cudaFree", cudaFree(ptr), cudaSuccess);
    app::log_free("cudaFree", ptr, nullptr, false);
}

}  // namespace

// One call site for every output, as a framework's warm-up iteration would have.
APP_FN void warmup_outputs(std::vector<void*>* outputs) {
    for (int i = 0; i < k_warmup_outputs; ++i) {
        void* ptr = nullptr;
        app::expect("cudaMalloc", cudaMalloc(&ptr, warmup_output_size(i)), cudaSuccess);
        app::log_alloc("cudaMalloc", ptr, warmup_output_size(i), nullptr, false, app::current_device(), __func__);
        outputs->push_back(ptr);
    }
}

APP_FN void warmup_scratch() { free_device(device_alloc(k_warmup_scratch, __func__)); }

APP_FN void* warmup_pinned() {
    void* ptr = nullptr;
    app::expect("cudaMallocHost", cudaMallocHost(&ptr, k_warmup_pinned), cudaSuccess);
    app::log_alloc("cudaMallocHost", ptr, k_warmup_pinned, nullptr, false, -1, __func__);
    return ptr;
}

APP_FN void* warmup_async() {
    void* ptr = nullptr;
    app::expect("cudaMallocAsync", cudaMallocAsync(&ptr, k_warmup_async, g_side), cudaSuccess);
    app::log_alloc("cudaMallocAsync", ptr, k_warmup_async, g_side, true, app::current_device(), __func__);
    return ptr;
}

APP_FN void second_warmup(std::vector<void*>* blocks) {
    for (size_t size : {k_second_kept, k_second_freed}) {
        void* ptr = nullptr;
        app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
        app::log_alloc("cudaMalloc", ptr, size, nullptr, false, app::current_device(), __func__);
        blocks->push_back(ptr);
    }
}

// A capture with a private pool segment; returns the segment.
APP_FN void* capture_with_pool(size_t pool_size) {
    app::expect("cudaStreamBeginCapture", cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    app::exchange_mode("mode_before_pool", cudaStreamCaptureModeRelaxed);
    void* segment = device_alloc(pool_size, __func__);
    app::exchange_mode("mode_in_pool", cudaStreamCaptureModeGlobal);
    cudaGraph_t graph = nullptr;
    app::expect("cudaStreamEndCapture", cudaStreamEndCapture(g_stream, &graph), cudaSuccess);
    app::expect("cudaGraphDestroy", cudaGraphDestroy(graph), cudaSuccess);
    return segment;
}

int main() {
    app::init_log();
    app::log_tid("tid_main");
    app::expect("cudaStreamCreate", cudaStreamCreate(&g_stream), cudaSuccess);
    app::expect("cudaStreamCreate", cudaStreamCreate(&g_side), cudaSuccess);
    app::log_handle("stream", g_stream);

    std::vector<void*> outputs;
    warmup_outputs(&outputs);
    warmup_scratch();
    void* pinned = warmup_pinned();
    void* async = warmup_async();
    for (int i = 1; i < k_warmup_outputs; i += 2) free_device(outputs[static_cast<size_t>(i)]);

    void* pool1 = capture_with_pool(k_capture1_pool);

    std::vector<void*> second;
    second_warmup(&second);
    free_device(second[1]);

    void* pool2 = capture_with_pool(k_capture2_pool);

    for (int i = 0; i < k_warmup_outputs; i += 2) free_device(outputs[static_cast<size_t>(i)]);
    free_device(second[0]);
    free_device(pool1);
    free_device(pool2);
    app::expect("cudaFreeHost", cudaFreeHost(pinned), cudaSuccess);
    app::log_free("cudaFreeHost", pinned, nullptr, false);
    app::expect("cudaFreeAsync", cudaFreeAsync(async, g_side), cudaSuccess);
    app::log_free("cudaFreeAsync", async, g_side, true);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(g_stream), cudaSuccess);
    app::expect("cudaStreamDestroy", cudaStreamDestroy(g_side), cudaSuccess);
    app::log_fake_counters();
    app::expect("cudaGetLastError(final)", cudaGetLastError(), cudaSuccess);
    return 0;
}

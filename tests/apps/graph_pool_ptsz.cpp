// Part of graph_pool, compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (see CMakeLists.txt): here
// cudaStreamBeginCapture, cudaStreamBeginCaptureToGraph, cudaStreamEndCapture,
// cudaStreamGetCaptureInfo, cudaGraphInstantiateWithParams and cudaGraphLaunch are macros for the
// runtime's _ptsz entry points, which is what programs built with nvcc --default-stream per-thread
// call.
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "graph_pool_ptsz.cpp must be compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#include "graph_pool_calls.h"

namespace {

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    return cudaStreamBeginCapture(stream, mode);
}

cudaError_t begin_capture_to_graph(cudaStream_t stream, cudaGraph_t graph,
                                   cudaStreamCaptureMode mode) {
    return cudaStreamBeginCaptureToGraph(stream, graph, nullptr, nullptr, 0, mode);
}

cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph) {
    return cudaStreamEndCapture(stream, graph);
}

cudaError_t get_capture_info(cudaStream_t stream, cudaStreamCaptureStatus* status,
                             unsigned long long* id, cudaGraph_t* graph) {
    return cudaStreamGetCaptureInfo(stream, status, id, graph);
}

cudaError_t instantiate_with_params(cudaGraphExec_t* exec, cudaGraph_t graph,
                                    cudaGraphInstantiateParams* params) {
    return cudaGraphInstantiateWithParams(exec, graph, params);
}

cudaError_t launch(cudaGraphExec_t exec, cudaStream_t stream) { return cudaGraphLaunch(exec, stream); }

}  // namespace

const CaptureCalls& ptsz_capture_calls() {
    static const CaptureCalls calls = {"ptsz",          begin_capture,           begin_capture_to_graph,
                                       end_capture,     get_capture_info,        instantiate_with_params,
                                       launch};
    return calls;
}

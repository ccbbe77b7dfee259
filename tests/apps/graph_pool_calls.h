// The capture, instantiate and launch calls of graph_pool, in two sets: the legacy default stream
// entry points (graph_pool.cpp) and the per-thread default stream ones (graph_pool_ptsz.cpp,
// compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM: cudaStreamBeginCapture_ptsz & co.).
#pragma once

#include <cuda_runtime_api.h>

struct CaptureCalls {
    const char* name;  // "legacy" or "ptsz"
    cudaError_t (*begin_capture)(cudaStream_t, cudaStreamCaptureMode);
    cudaError_t (*begin_capture_to_graph)(cudaStream_t, cudaGraph_t, cudaStreamCaptureMode);
    cudaError_t (*end_capture)(cudaStream_t, cudaGraph_t*);
    cudaError_t (*get_capture_info)(cudaStream_t, cudaStreamCaptureStatus*, unsigned long long*, cudaGraph_t*);
    cudaError_t (*instantiate_with_params)(cudaGraphExec_t*, cudaGraph_t, cudaGraphInstantiateParams*);
    cudaError_t (*launch)(cudaGraphExec_t, cudaStream_t);
};

const CaptureCalls& legacy_capture_calls();
const CaptureCalls& ptsz_capture_calls();

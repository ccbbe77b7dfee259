// Part of graph_pool, compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (see CMakeLists.txt): here
// cudaStreamBeginCapture, cudaStreamBeginCaptureToGraph, cudaStreamEndCapture,
// cudaStreamGetCaptureInfo, cudaGraphInstantiateWithParams and cudaGraphLaunch are macros for the
// runtime's _ptsz entry points, which is what programs built with nvcc --default-stream per-thread
// call.
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "graph_pool_ptsz.cpp must be compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#include "graph_pool_calls.h"

#define CAPTURE_CALLS_FUNCTION ptsz_capture_calls
#define CAPTURE_CALLS_NAME "ptsz"
#include "graph_pool_calls.inc"

// The interposed stream-capture and CUDA-graph lifecycle functions. Each passes the caller's
// arguments through unchanged and returns exactly the real result; afterwards memguard updates
// its capture view and graph registry and writes the lifecycle records. No CUDA call is made
// here, so nothing can disturb a capture in progress.
#include "interpose/hook_support.h"
#include "track/recorder.h"

using memguard::interpose::ErrnoKeeper;
using memguard::interpose::handle;
using memguard::track::CaptureMode;
using memguard::track::HookScope;
using memguard::track::Recorder;

namespace {

/// Runs the real call, then `after(recorder, result)` when memguard is recording.
template <typename Call, typename After>
cudaError_t observe(Call&& call, After&& after) {
    memguard::interpose::ensure_initialized();
    HookScope scope;
    Recorder& rec = memguard::runtime::recorder();
    if (!scope.outermost() || !rec.active()) return call();
    cudaError_t err = call();
    ErrnoKeeper keep_errno;
    after(rec, err);
    return err;
}

CaptureMode mode_of(cudaStreamCaptureMode m) { return static_cast<CaptureMode>(static_cast<int>(m)); }

memguard::track::StreamArg stream_of(cudaStream_t s, const char* hook_name) {
    return memguard::interpose::stream_arg(s, memguard::interpose::is_ptsz(hook_name));
}

}  // namespace

// --- capture ------------------------------------------------------------------------------------
#define MG_BEGIN_CAPTURE(name)                                                                       \
    MG_EXPORT cudaError_t name(cudaStream_t stream, cudaStreamCaptureMode mode) {                    \
        MG_REAL(name, cudaStream_t, cudaStreamCaptureMode);                                          \
        return observe([&] { return fn(stream, mode); },                                             \
                       [&](Recorder& rec, cudaError_t err) {                                         \
                           if (err == cudaSuccess)                                                   \
                               rec.record_capture_begin(stream_of(stream, #name), mode_of(mode), 0); \
                       });                                                                           \
    }
MG_BEGIN_CAPTURE(cudaStreamBeginCapture)
MG_BEGIN_CAPTURE(cudaStreamBeginCapture_ptsz)

#define MG_BEGIN_CAPTURE_TO_GRAPH(name)                                                                           \
    MG_EXPORT cudaError_t name(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* deps,               \
                               const cudaGraphEdgeData* edge_data, size_t num_deps, cudaStreamCaptureMode mode) { \
        MG_REAL(name, cudaStream_t, cudaGraph_t, const cudaGraphNode_t*, const cudaGraphEdgeData*, size_t,        \
                cudaStreamCaptureMode);                                                                           \
        return observe([&] { return fn(stream, graph, deps, edge_data, num_deps, mode); },                        \
                       [&](Recorder& rec, cudaError_t err) {                                                      \
                           if (err == cudaSuccess)                                                                \
                               rec.record_capture_begin(stream_of(stream, #name), mode_of(mode), handle(graph));  \
                       });                                                                                        \
    }
MG_BEGIN_CAPTURE_TO_GRAPH(cudaStreamBeginCaptureToGraph)
MG_BEGIN_CAPTURE_TO_GRAPH(cudaStreamBeginCaptureToGraph_ptsz)

// The capture ends when the call succeeds, and also when it fails because the capture was
// invalidated (901, no graph); other errors (wrong thread, a stream not capturing) leave it going.
#define MG_END_CAPTURE(name)                                                                           \
    MG_EXPORT cudaError_t name(cudaStream_t stream, cudaGraph_t* graph) {                              \
        MG_REAL(name, cudaStream_t, cudaGraph_t*);                                                     \
        return observe([&] { return fn(stream, graph); },                                              \
                       [&](Recorder& rec, cudaError_t err) {                                           \
                           if (err != cudaSuccess && err != cudaErrorStreamCaptureInvalidated) return; \
                           uintptr_t g = err == cudaSuccess && graph ? handle(*graph) : 0;             \
                           rec.record_capture_end(stream_of(stream, #name), static_cast<int>(err), g); \
                       });                                                                             \
    }
MG_END_CAPTURE(cudaStreamEndCapture)
MG_END_CAPTURE(cudaStreamEndCapture_ptsz)

MG_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
    MG_REAL(cudaThreadExchangeStreamCaptureMode, cudaStreamCaptureMode*);
    cudaStreamCaptureMode requested = mode ? *mode : cudaStreamCaptureModeGlobal;
    cudaError_t err = fn(mode);
    if (err == cudaSuccess && mode) memguard::track::set_thread_capture_mode(mode_of(requested));
    return err;
}

// --- graphs -------------------------------------------------------------------------------------
#define MG_INSTANTIATE(name, Extra)                                                                              \
    MG_EXPORT cudaError_t name(cudaGraphExec_t* exec, cudaGraph_t graph, Extra extra) {                          \
        MG_REAL(name, cudaGraphExec_t*, cudaGraph_t, Extra);                                                     \
        return observe([&] { return fn(exec, graph, extra); },                                                   \
                       [&](Recorder& rec, cudaError_t err) {                                                     \
                           if (err == cudaSuccess && exec) rec.record_instantiate(handle(*exec), handle(graph)); \
                       });                                                                                       \
    }
MG_INSTANTIATE(cudaGraphInstantiate, unsigned long long)
MG_INSTANTIATE(cudaGraphInstantiateWithFlags, unsigned long long)
MG_INSTANTIATE(cudaGraphInstantiateWithParams, cudaGraphInstantiateParams*)
MG_INSTANTIATE(cudaGraphInstantiateWithParams_ptsz, cudaGraphInstantiateParams*)

#define MG_LAUNCH(name)                                                                             \
    MG_EXPORT cudaError_t name(cudaGraphExec_t exec, cudaStream_t stream) {                         \
        MG_REAL(name, cudaGraphExec_t, cudaStream_t);                                               \
        return observe([&] { return fn(exec, stream); },                                            \
                       [&](Recorder& rec, cudaError_t err) {                                        \
                           if (err == cudaSuccess) rec.record_launch(handle(exec), handle(stream)); \
                       });                                                                          \
    }
MG_LAUNCH(cudaGraphLaunch)
MG_LAUNCH(cudaGraphLaunch_ptsz)

MG_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    MG_REAL(cudaGraphExecDestroy, cudaGraphExec_t);
    return observe([&] { return fn(exec); },
                   [&](Recorder& rec, cudaError_t err) {
                       if (err == cudaSuccess) rec.record_exec_destroy(handle(exec));
                   });
}

MG_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    MG_REAL(cudaGraphDestroy, cudaGraph_t);
    return observe([&] { return fn(graph); },
                   [&](Recorder& rec, cudaError_t err) {
                       if (err == cudaSuccess) rec.record_graph_destroy(handle(graph));
                   });
}

// Control and inspection functions of the fake CUDA runtime (tests/fake_cuda). They exist only in
// the fake, never in the real libcudart, so only test programs may call them.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

/// Sets the capacity of every device, in bytes (the default is 16 GiB, or FAKE_CUDA_CAPACITY).
/// Blocks already live stay live even when they now exceed it.
void fakecuda_set_capacity(size_t bytes);

/// Makes the next `count` allocation calls (any of the seven allocating functions, any thread)
/// fail with `error` (a cudaError_t value) without allocating. A count of 0 cancels.
void fakecuda_fail_next(int count, int error);

/// Bytes of GPU memory (kinds device, async and managed; all devices) live now, counted as
/// requested (cudaMallocPitch counts pitch * height).
size_t fakecuda_live_bytes(void);

/// Bytes of pinned host memory (cudaMallocHost, cudaHostAlloc) live now.
size_t fakecuda_live_pinned_bytes(void);

/// Number of allocation calls that succeeded with a non-null pointer since the process started.
uint64_t fakecuda_alloc_count(void);

/// Number of blocks (all kinds) live now.
uint64_t fakecuda_live_count(void);

/// Number of stream captures in progress now (active or invalidated, not yet ended).
uint64_t fakecuda_capture_count(void);

/// Number of graphs alive now (made by cudaGraphCreate or a successful cudaStreamEndCapture, and
/// not destroyed).
uint64_t fakecuda_graph_count(void);

/// Number of graph execs alive now.
uint64_t fakecuda_graph_exec_count(void);

/// Number of successful graph launches (cudaGraphLaunch, cudaGraphLaunch_ptsz) since the process
/// started.
uint64_t fakecuda_graph_launch_count(void);
}

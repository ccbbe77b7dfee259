// Sizes the test applications allocate, shared with the preload tests so that the tests check the
// report against numbers they know independently of what the applications print. Every size is
// distinct and not a multiple of 256, so a report that records a rounded or a wrong block's size
// cannot match by accident.
#pragma once

#include <cstddef>

namespace app_sizes {

// alloc_kinds: one block per allocating API, freed.
constexpr size_t k_device = 1'000'003;        // cudaMalloc, freed by cudaFree
constexpr size_t k_async = 2'000'003;         // cudaMallocAsync on stream A, freed on stream B
constexpr size_t k_pool = 3'000'003;          // cudaMallocFromPoolAsync on stream A, freed on 0
constexpr size_t k_managed = 4'000'003;       // cudaMallocManaged, freed by cudaFree
constexpr size_t k_pitch_width = 1'000;       // cudaMallocPitch, pitch rounds up to 1024
constexpr size_t k_pitch_height = 7;
constexpr size_t k_host = 5'000'003;          // cudaMallocHost, freed by cudaFreeHost
constexpr size_t k_host_alloc = 6'000'003;    // cudaHostAlloc, freed by cudaFreeHost
constexpr size_t k_device1 = 1'100'003;       // cudaMalloc on device 1 (when there are two)
// alloc_kinds: the per-thread default stream entry points (cudaMallocAsync_ptsz & co.).
constexpr size_t k_async_ptsz = 2'100'003;
constexpr size_t k_pool_ptsz = 3'100'003;
// alloc_kinds: misuse that the runtime rejects.
constexpr size_t k_wrong_free_device = 1'300'003;  // cudaFreeHost on it fails, then cudaFree
constexpr size_t k_wrong_free_host = 1'400'003;    // cudaFree on it fails, then cudaFreeHost
constexpr size_t k_bad_managed = 1'500'003;        // cudaMallocManaged with invalid flags
// alloc_kinds: live at exit.
constexpr size_t k_leak_device = 7'000'003;
constexpr size_t k_leak_managed = 8'000'003;
constexpr size_t k_leak_pinned = 9'000'003;
constexpr size_t k_leak_async = 1'200'003;

// oom
constexpr size_t k_oom_capacity = 64ull << 20;  // FAKE_CUDA_CAPACITY the tests set
constexpr size_t k_oom_block = 10ull << 20;
constexpr size_t k_oom_small = 1'000'003;
constexpr size_t k_oom_device1_big = 60ull << 20;
constexpr int k_injected_error = 719;  // cudaErrorLaunchFailure: a failure that is not an OOM

// oom fail_at: FAKE_CUDA_FAIL_AT=3 and five cudaMalloc calls of this size.
constexpr size_t k_fail_at_block = 1'048'583;
constexpr int k_fail_at_calls = 5;

// threads: thread t (0-based) allocates k_thread_iterations blocks of size
// thread_block_size(t, i) and frees them, then leaves one block of thread_leak_size(t) live.
constexpr int k_thread_count = 8;
constexpr int k_thread_iterations = 200;
constexpr size_t thread_block_size(int t, int i) {
    return static_cast<size_t>(t + 1) * 100'000 + static_cast<size_t>(i);
}
constexpr size_t thread_leak_size(int t) { return static_cast<size_t>(t + 1) * 1'000'000 + 7; }
// Every k_thread_async_every-th block is stream-ordered (cudaMallocAsync/cudaFreeAsync).
constexpr int k_thread_async_every = 10;

// dlopen_local (allocated by the dlopen()ed library)
constexpr size_t k_dl_freed = 31'000'003;
constexpr size_t k_dl_live = 32'000'003;
constexpr size_t k_dl_pinned = 33'000'003;

// fork and fork_exec
constexpr size_t k_parent_before_fork = 11'000'003;
constexpr size_t k_child = 12'000'003;
constexpr size_t k_parent_after_fork = 13'000'003;
constexpr size_t k_exec_child = 14'000'003;  // allocated by exit_code (the exec()ed program)
constexpr size_t k_exec_child_pinned = 15'000'003;

// killed
constexpr size_t k_killed_device = 21'000'003;
constexpr size_t k_killed_managed = 22'000'003;  // freed before the kill
constexpr size_t k_killed_pinned = 23'000'003;
constexpr size_t k_killed_async = 24'000'003;

// exit_code
constexpr int k_exit_code = 7;

}  // namespace app_sizes

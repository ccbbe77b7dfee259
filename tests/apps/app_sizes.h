// Sizes the test applications allocate, shared with the preload tests so that the tests check the
// report against numbers they know independently of what the applications print. Every size is
// distinct and not a multiple of 256, so a report that records a rounded or a wrong block's size
// cannot match by accident.
#pragma once

#include <cstddef>

namespace app_sizes {

// alloc_kinds: one block per allocating API, freed.
constexpr size_t k_device = 1'000'003;   // cudaMalloc, freed by cudaFree
constexpr size_t k_async = 2'000'003;    // cudaMallocAsync on stream A, freed on stream B
constexpr size_t k_pool = 3'000'003;     // cudaMallocFromPoolAsync on stream A, freed on 0
constexpr size_t k_managed = 4'000'003;  // cudaMallocManaged, freed by cudaFree
constexpr size_t k_pitch_width = 1'000;  // cudaMallocPitch, pitch rounds up to 1024
constexpr size_t k_pitch_height = 7;
constexpr size_t k_host = 5'000'003;        // cudaMallocHost, freed by cudaFreeHost
constexpr size_t k_host_alloc = 6'000'003;  // cudaHostAlloc, freed by cudaFreeHost
constexpr size_t k_device1 = 1'100'003;     // cudaMalloc on device 1 (when there are two)
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

// graph_pool: a capture whose graph gets a private memory pool (cudaMalloc in relaxed mode), two
// execs replayed k_exec1_launches and k_exec2_launches times.
constexpr size_t k_pool_segment = 41'000'003;      // the private pool segment
constexpr size_t k_graph_async = 42'000'003;       // cudaMallocAsync on the capturing stream
constexpr size_t k_graph_async_side = 43'000'003;  // cudaMallocAsync on a stream not capturing
constexpr int k_exec1_launches = 3;
constexpr int k_exec2_launches = 5;

// unsafe_calls: potentially unsafe calls during capture.
constexpr size_t k_unsafe_own = 51'000'003;             // cudaMalloc by the capturing thread: refused
constexpr size_t k_unsafe_other = 52'000'003;           // cudaMalloc by another thread: refused
constexpr size_t k_unsafe_victim = 53'000'003;          // its cudaFree during a capture is refused
constexpr size_t k_unsafe_host = 54'000'003;            // cudaMallocHost by the capturing thread: refused
constexpr size_t k_allowed_local = 55'000'003;          // another thread, thread-local capture: allowed
constexpr size_t k_allowed_relaxed_own = 56'000'003;    // relaxed capture, capturing thread
constexpr size_t k_allowed_relaxed_other = 57'000'003;  // relaxed capture, another thread
constexpr size_t k_allowed_relaxed_mode = 58'000'003;   // global capture, a relaxed-mode thread
constexpr size_t k_allowed_local_mode = 59'000'003;     // global capture, a thread-local-mode thread

// free_live_graph: blocks of one capture freed while its execs are alive, and after.
constexpr size_t k_flg_owned_a = 61'000'003;  // cudaFree while both execs are alive: hazard
constexpr size_t k_flg_async = 62'000'003;    // cudaFreeAsync while the second exec is alive: hazard
constexpr size_t k_flg_owned_b = 63'000'003;  // cudaFree after both execs are gone: no hazard
constexpr size_t k_flg_plain = 64'000'003;    // not owned, freed while execs are alive: no hazard

// warmup: warm-up outputs allocated at one site, the even ones kept, before a first capture.
constexpr int k_warmup_outputs = 4;
constexpr size_t warmup_output_size(int i) { return 70'000'003 + static_cast<size_t>(i) * 100'000; }
constexpr size_t k_warmup_scratch = 71'000'003;  // allocated and freed before the capture
constexpr size_t k_warmup_pinned = 72'000'003;   // kept, but pinned host memory
constexpr size_t k_warmup_async = 73'000'003;    // kept, stream-ordered on another stream
constexpr size_t k_capture1_pool = 74'000'003;   // the first capture's pool segment
constexpr size_t k_second_kept = 75'000'003;     // allocated after the first capture, kept
constexpr size_t k_second_freed = 76'000'003;    // allocated after the first capture, freed
constexpr size_t k_capture2_pool = 77'000'003;   // the second capture's pool segment

// many_captures: one more capture in progress at once than memguard has room for.
constexpr int k_capture_slots = 64;  // memguard's CaptureView::kSlots
constexpr int k_many_captures = k_capture_slots + 1;
constexpr size_t many_capture_size(int i) { return 80'000'003 + static_cast<size_t>(i) * 1'000; }

// capture_misuse
constexpr size_t k_wrong_thread_segment = 91'000'003;  // allocated after a wrong-thread end
constexpr size_t k_per_thread_a = 92'000'003;          // thread A, on its per-thread default stream
constexpr size_t k_per_thread_b = 93'000'003;          // thread B, on its per-thread default stream

}  // namespace app_sizes

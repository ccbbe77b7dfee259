// The text of an allocator-mode out-of-memory error: PyTorch's own wording (the OOM branch of
// DeviceCachingAllocator::malloc in c10/cuda/CUDACachingAllocator.cpp, sizes by its format_size)
// with memguard's figures, so that tools and tests that match PyTorch's message keep matching,
// then memguard's own detail. Pure: the figures are passed in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memguard::allocmode {

/// PyTorch's format_size: "512 bytes" up to 1 KiB, then KiB up to 1 MiB, MiB up to 1 GiB, GiB
/// beyond, with two decimals ("2.00 GiB", "139.81 GiB").
std::string format_size(uint64_t bytes);

/// One process using the device, as NVML lists it.
struct DeviceProcess {
    unsigned pid = 0;
    uint64_t used = 0;  // bytes
};

/// PyTorch's sentence on the device's processes: "Including non-PyTorch memory, this process has
/// 1.20 GiB memory in use. Process 4242 has 3.00 GiB memory in use. " (this process named so,
/// the others by pid, in NVML's order). Empty when NVML gave no list.
std::string process_memory_text(const std::vector<DeviceProcess>& processes, unsigned self_pid);

struct TorchOomFigures {
    int device = 0;
    size_t alloc_size = 0;    // the device allocation that failed (PyTorch's alloc_size)
    size_t device_total = 0;  // 0: unknown
    size_t device_free = 0;
    bool free_known = true;          // false during a capture (cudaMemGetInfo is not asked)
    std::string processes;           // process_memory_text()
    size_t allowed = 0;              // the memory fraction's limit in bytes; 0: none
    size_t allocated = 0;            // allocated_bytes.all.current
    size_t reserved = 0;             // reserved_bytes.all.current
    size_t private_pool_cached = 0;  // free cached bytes of private pools
};

/// PyTorch's message: "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total
/// capacity of 139.81 GiB of which 1.23 GiB is free. <processes><allowed>Of the allocated memory
/// ... is allocated by PyTorch, [with ... allocated in private pools (e.g., CUDA Graphs), ]and ...
/// is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try
/// setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See
/// documentation for Memory Management  (<url>)". When the free memory is unknown (a capture)
/// the second sentence says so instead of a figure.
std::string torch_oom_message(const TorchOomFigures& f);

}  // namespace memguard::allocmode

#include "allocmode/torch_oom_message.h"

#include <cstdio>

namespace memguard::allocmode {

namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

// Where PyTorch's message sends the reader (2.9 and later).
constexpr const char* kDocs =
    "https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf";

size_t minus(size_t a, size_t b) { return a > b ? a - b : 0; }

}  // namespace

std::string format_size(uint64_t bytes) {
    char text[64];
    const double b = static_cast<double>(bytes);
    if (bytes <= kKiB) {
        std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
    } else if (bytes <= kMiB) {
        std::snprintf(text, sizeof text, "%.2f KiB", b / static_cast<double>(kKiB));
    } else if (bytes <= kGiB) {
        std::snprintf(text, sizeof text, "%.2f MiB", b / static_cast<double>(kMiB));
    } else {
        std::snprintf(text, sizeof text, "%.2f GiB", b / static_cast<double>(kGiB));
    }
    return text;
}

std::string process_memory_text(const std::vector<DeviceProcess>& processes, unsigned self_pid) {
    std::string out;
    for (const DeviceProcess& p : processes) {
        out += p.pid == self_pid ? std::string("Including non-PyTorch memory, this process")
                                 : "Process " + std::to_string(p.pid);
        out += " has " + format_size(p.used) + " memory in use. ";
    }
    return out;
}

std::string torch_oom_message(const TorchOomFigures& f) {
    std::string m = "CUDA out of memory. Tried to allocate " + format_size(f.alloc_size) + ". GPU " +
                    std::to_string(f.device) + " has a total capacity of ";
    m += f.device_total ? format_size(f.device_total) : std::string("an unknown size");
    if (f.free_known) {
        m += " of which " + format_size(f.device_free) + " is free. ";
    } else {
        m += " of which an unknown amount is free (not asked during a CUDA graph capture). ";
    }
    m += f.processes;
    if (f.allowed) m += format_size(f.allowed) + " allowed; ";
    m += "Of the allocated memory " + format_size(f.allocated + f.private_pool_cached) + " is allocated by PyTorch, ";
    if (f.private_pool_cached) {
        m += "with " + format_size(f.private_pool_cached) + " allocated in private pools (e.g., CUDA Graphs), ";
    }
    m += "and " + format_size(minus(minus(f.reserved, f.allocated), f.private_pool_cached)) +
         " is reserved by PyTorch but unallocated.";
    m += " If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
         "to avoid fragmentation.  See documentation for Memory Management  (";
    m += kDocs;
    m += ")";
    return m;
}

}  // namespace memguard::allocmode

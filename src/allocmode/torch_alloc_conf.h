// PYTORCH_CUDA_ALLOC_CONF, read for memguard's allocator (MEMGUARD_ALLOCATOR=memguard), so that a
// program tuned for PyTorch's allocator keeps its settings where memguard's allocator has them.
// Pure: the value is passed in.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace memguard::allocmode {

struct TorchAllocConf {
    size_t max_split_size = static_cast<size_t>(-1);  // max_split_size_mb (bytes); SIZE_MAX: none
    size_t max_non_split_rounding = 20u << 20;        // max_non_split_rounding_mb (bytes)
    unsigned roundup_power2_divisions = 0;            // roundup_power2_divisions (one number)
    std::optional<bool> expandable_segments;          // expandable_segments:True|False, when given
    /// One line per setting memguard's allocator does not apply, or does not accept (what it
    /// does instead).
    std::vector<std::string> notes;
};

/// Parses "key:value,key:value" as PyTorch does (keys and values as PyTorch names them).
TorchAllocConf parse_torch_alloc_conf(const char* value);

}  // namespace memguard::allocmode

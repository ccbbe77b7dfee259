// PYTORCH_CUDA_ALLOC_CONF, read for memguard's allocator (MEMGUARD_ALLOCATOR=memguard), so that a
// program tuned for PyTorch's allocator keeps its settings where memguard's allocator has them.
// Pure: the value is passed in.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "alloc/caching_allocator.h"

namespace memguard::allocmode {

struct TorchAllocConf {
    size_t max_split_size = static_cast<size_t>(-1);  // max_split_size_mb (bytes); SIZE_MAX: none
    size_t max_non_split_rounding = 20u << 20;        // max_non_split_rounding_mb (bytes)
    bool max_non_split_rounding_given = false;        // the text set it
    unsigned roundup_power2_divisions = 0;            // roundup_power2_divisions (one number)
    std::optional<bool> expandable_segments;          // expandable_segments:True|False, when given
    double garbage_collection_threshold = 0.0;        // garbage_collection_threshold (0: off)
    /// One line per setting memguard's allocator does not apply, or does not accept (what it
    /// does instead).
    std::vector<std::string> notes;
};

/// Parses "key:value,key:value" as PyTorch does (keys and values as PyTorch names them).
TorchAllocConf parse_torch_alloc_conf(const char* value);

/// The core's settings after PyTorch reads `conf` over `current` (its parseArgs): the split limit,
/// the power-of-two rounding and the garbage collection threshold return to their defaults unless
/// the text sets them, the non-split rounding keeps its value unless it does.
alloc::AllocatorConfig core_settings(const TorchAllocConf& conf, const alloc::AllocatorConfig& current);

}  // namespace memguard::allocmode

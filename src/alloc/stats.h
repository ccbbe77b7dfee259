// The caching allocator's statistics, shaped like PyTorch's DeviceStats so that the bridge can
// answer torch.cuda.memory_stats() with the same keys.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memguard::alloc {

struct Stat {
    int64_t current = 0;
    int64_t peak = 0;
    int64_t allocated = 0;
    int64_t freed = 0;

    void update(int64_t delta) noexcept {
        current += delta;
        if (delta > 0)
            allocated += delta;
        else
            freed -= delta;
        if (current > peak) peak = current;
    }
    /// update(+n) and update(-n) with the sign known where they are called, so without its tests
    /// (the allocator updates about thirty stats per allocation and free). A decrease never
    /// raises the peak: current <= peak always holds.
    void add(uint64_t n) noexcept {
        current += static_cast<int64_t>(n);
        allocated += static_cast<int64_t>(n);
        if (current > peak) peak = current;
    }
    void sub(uint64_t n) noexcept {
        current -= static_cast<int64_t>(n);
        freed += static_cast<int64_t>(n);
    }
    void reset_peak() noexcept { peak = current; }
    void reset_accumulated() noexcept { allocated = freed = 0; }
};

/// Index into a StatArray: every pool, the small pool, the large pool.
enum StatType : int { kStatAll = 0, kStatSmallPool = 1, kStatLargePool = 2, kNumStatTypes = 3 };
using StatArray = std::array<Stat, kNumStatTypes>;

struct DeviceStats {
    StatArray allocation;      // allocated blocks
    StatArray segment;         // device allocations held
    StatArray active;          // allocated blocks plus freed ones waiting for events
    StatArray inactive_split;  // free blocks that are part of a split segment
    StatArray allocated_bytes;
    StatArray reserved_bytes;
    StatArray active_bytes;
    StatArray inactive_split_bytes;
    StatArray requested_bytes;  // the sizes the callers asked for (before rounding), of active blocks
    Stat oversize_allocations;  // allocations of max_split_size or more
    Stat oversize_segments;
    int64_t num_alloc_retries = 0;  // allocations that had to free the cache and retry
    int64_t num_ooms = 0;
    int64_t num_sync_all_streams = 0;
    int64_t num_device_alloc = 0;  // segment_malloc calls that succeeded
    int64_t num_device_free = 0;
    int64_t max_split_size = 0;

    void reset_peak() noexcept;
    void reset_accumulated() noexcept;
};

/// The stats as torch.cuda.memory_stats() names them ("allocated_bytes.all.current",
/// "reserved_bytes.large_pool.peak", "num_ooms", ...), in a stable order.
std::vector<std::pair<std::string, int64_t>> memory_stats_items(const DeviceStats& s);

}  // namespace memguard::alloc

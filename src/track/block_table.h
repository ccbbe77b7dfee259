// The live blocks of this process, keyed by address, with live-byte counters per device.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "track/events.h"

namespace memguard::track {

struct LiveBlock {
    uint64_t size = 0;
    uint32_t stack_id = 0;
    Kind kind = Kind::Device;
    int32_t device = 0;
    uint32_t capture_id = 0;  // the stream capture that owns the block (0: none)
    int64_t t_alloc = 0;      // report time of the allocation
};

class BlockTable {
public:
    static constexpr int kMaxDevices = 64;

    /// Adds a block. An existing entry at the same address (memory freed by a path memguard does
    /// not see, such as cudaDeviceReset) is replaced, no longer counted, and returned.
    std::optional<LiveBlock> insert(uintptr_t addr, const LiveBlock& b);
    /// Removes and returns the block at addr, if live.
    std::optional<LiveBlock> remove(uintptr_t addr);

    /// GPU bytes (device, async, managed kinds) live on `device` now.
    uint64_t gpu_live_bytes(int device) const noexcept;
    /// The most GPU bytes live on `device` at once since the last reset_gpu_peak (or the start).
    uint64_t gpu_peak_bytes(int device) const noexcept;
    /// Starts a new peak of `device` at its live bytes now. An insert racing with the reset may be
    /// left out of the new peak; the next insert on that device counts again.
    void reset_gpu_peak(int device) noexcept;

    /// Calls fn(addr, block) for every live block, one shard lock at a time.
    template <typename Fn>
    void for_each(Fn&& fn) {
        for (auto& s : shards_) {
            std::lock_guard<std::mutex> lock(s.mu);
            for (const auto& [addr, block] : s.blocks) fn(addr, block);
        }
    }

    void clear();
    void lock_all();
    void unlock_all();

private:
    void account(const LiveBlock& b, bool add) noexcept;

    static constexpr int kShards = 64;
    struct alignas(64) Shard {
        std::mutex mu;
        std::unordered_map<uintptr_t, LiveBlock> blocks;
    };
    Shard shards_[kShards];
    std::array<std::atomic<uint64_t>, kMaxDevices> gpu_live_{};
    // Raised by a relaxed compare-and-swap loop in account() only when an insert sets a new peak:
    // otherwise one relaxed load on the insert path, no lock and no allocation.
    std::array<std::atomic<uint64_t>, kMaxDevices> gpu_peak_{};
};

}  // namespace memguard::track

// Interns native stacks as small integer ids (1, 2, ...). Each distinct stack is stored once;
// the first time a stack is seen the caller-supplied callback runs, under the shard lock, so a
// record that uses the id can never precede the record that defines it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace memguard::track {

class StackTable {
public:
    using OnNew = void (*)(void* ctx, uint32_t id, const uintptr_t* ips, int n);

    /// Returns the id of the stack; calls on_new(ctx, id, ips, n) first if it is new.
    uint32_t intern(const uintptr_t* ips, int n, OnNew on_new, void* ctx);

    /// Number of distinct stacks.
    uint32_t size() const { return next_id_.load(std::memory_order_relaxed) - 1; }

    /// The frames of the stacks whose ids are in `ids`, into `out` (id -> frames): one pass over the
    /// table, each shard under its lock. Not for the hook path.
    void frames_of(const std::unordered_set<uint32_t>& ids, std::unordered_map<uint32_t, std::vector<uintptr_t>>* out);

    /// Drops everything (fork child). Only valid while no other thread uses the table.
    void clear();

    void lock_all();
    void unlock_all();

    static uint64_t hash(const uintptr_t* ips, int n) noexcept;

private:
    static constexpr int kShards = 64;
    struct Entry {
        uint32_t id;
        uint32_t offset;  // into Shard::frames
        uint32_t n;
    };
    struct alignas(64) Shard {
        std::mutex mu;
        std::unordered_multimap<uint64_t, Entry> by_hash;
        std::vector<uintptr_t> frames;
    };
    uint32_t intern_shared(uint64_t h, const uintptr_t* ips, int n, OnNew on_new, void* ctx);

    Shard shards_[kShards];
    std::atomic<uint32_t> next_id_{1};
};

}  // namespace memguard::track

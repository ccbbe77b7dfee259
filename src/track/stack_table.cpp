#include "track/stack_table.h"

#include <cstring>

namespace memguard::track {

uint64_t StackTable::hash(const uintptr_t* ips, int n) noexcept {
    // Four independent lanes: with one multiply chain through every frame, hashing a deep stack
    // was the larger part of interning it (bench/alloc_tracking_cost.cpp). The final mix moves
    // the high bits down, where the shard and the bucket are chosen.
    constexpr uint64_t k = 0x9e3779b97f4a7c15ULL;
    uint64_t a = k ^ static_cast<uint64_t>(n), b = 0xc2b2ae3d27d4eb4fULL, c = 0x165667b19e3779f9ULL,
             d = 0x27d4eb2f165667c5ULL;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        a = (a ^ static_cast<uint64_t>(ips[i])) * k;
        b = (b ^ static_cast<uint64_t>(ips[i + 1])) * k;
        c = (c ^ static_cast<uint64_t>(ips[i + 2])) * k;
        d = (d ^ static_cast<uint64_t>(ips[i + 3])) * k;
    }
    for (; i < n; ++i) a = (a ^ static_cast<uint64_t>(ips[i])) * k;
    auto rotl = [](uint64_t v, int r) { return (v << r) | (v >> (64 - r)); };
    uint64_t h = a ^ rotl(b, 17) ^ rotl(c, 31) ^ rotl(d, 47);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

uint32_t StackTable::intern(const uintptr_t* ips, int n, OnNew on_new, void* ctx) {
    // No per-thread cache in front of the shards: thread_local data of this size would not fit
    // the static TLS that glibc keeps for libraries loaded with dlopen (allocator mode by hand,
    // torch.cuda.memory.CUDAPluggableAllocator), and it measured as a small gain.
    return intern_shared(hash(ips, n), ips, n, on_new, ctx);
}

uint32_t StackTable::intern_shared(uint64_t h, const uintptr_t* ips, int n, OnNew on_new, void* ctx) {
    Shard& s = shards_[h % kShards];
    std::lock_guard<std::mutex> lock(s.mu);
    auto range = s.by_hash.equal_range(h);
    for (auto it = range.first; it != range.second; ++it) {
        const Entry& e = it->second;
        if (static_cast<int>(e.n) == n &&
            std::memcmp(s.frames.data() + e.offset, ips, sizeof(uintptr_t) * static_cast<size_t>(n)) == 0) {
            return e.id;
        }
    }
    uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    Entry e{id, static_cast<uint32_t>(s.frames.size()), static_cast<uint32_t>(n)};
    s.frames.insert(s.frames.end(), ips, ips + n);
    s.by_hash.emplace(h, e);
    if (on_new) on_new(ctx, id, ips, n);
    return id;
}

void StackTable::frames_of(const std::unordered_set<uint32_t>& ids,
                           std::unordered_map<uint32_t, std::vector<uintptr_t>>* out) {
    if (ids.empty()) return;
    for (auto& s : shards_) {
        std::lock_guard<std::mutex> lock(s.mu);
        for (const auto& [h, e] : s.by_hash) {
            if (ids.count(e.id) == 0) continue;
            const uintptr_t* f = s.frames.data() + e.offset;
            (*out)[e.id].assign(f, f + e.n);
        }
    }
}

void StackTable::clear() {
    for (auto& s : shards_) {
        s.by_hash.clear();
        s.frames.clear();
    }
    next_id_.store(1, std::memory_order_relaxed);
}

void StackTable::lock_all() {
    for (auto& s : shards_) s.mu.lock();
}

void StackTable::unlock_all() {
    for (auto& s : shards_) s.mu.unlock();
}

}  // namespace memguard::track

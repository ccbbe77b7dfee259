#include "track/stack_table.h"

#include <cstring>

namespace memguard::track {

uint64_t StackTable::hash(const uintptr_t* ips, int n) noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(n);
    for (int i = 0; i < n; ++i) {
        h ^= static_cast<uint64_t>(ips[i]) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdULL;
    }
    h ^= h >> 33;
    return h;
}

uint32_t StackTable::intern(const uintptr_t* ips, int n, OnNew on_new, void* ctx) {
    uint64_t h = hash(ips, n);
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

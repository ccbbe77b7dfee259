#include "track/block_table.h"

namespace memguard::track {
namespace {
inline size_t shard_of(uintptr_t addr) noexcept {
    // CUDA blocks are at least 256-byte aligned; mix the upper bits.
    uint64_t x = static_cast<uint64_t>(addr) >> 8;
    x *= 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>(x >> 58);  // 6 bits: 64 shards
}
inline size_t device_slot(int32_t device) noexcept {
    return device < 0 ? 0 : static_cast<size_t>(device) % BlockTable::kMaxDevices;
}
}  // namespace

void BlockTable::account(const LiveBlock& b, bool add) noexcept {
    if (!is_gpu(b.kind)) return;
    auto& counter = gpu_live_[device_slot(b.device)];
    if (add) {
        const uint64_t live = counter.fetch_add(b.size, std::memory_order_relaxed) + b.size;
        auto& peak = gpu_peak_[device_slot(b.device)];
        uint64_t seen = peak.load(std::memory_order_relaxed);
        while (live > seen && !peak.compare_exchange_weak(seen, live, std::memory_order_relaxed)) {
        }
    } else {
        counter.fetch_sub(b.size, std::memory_order_relaxed);
    }
}

std::optional<LiveBlock> BlockTable::insert(uintptr_t addr, const LiveBlock& b) {
    Shard& s = shards_[shard_of(addr)];
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, inserted] = s.blocks.try_emplace(addr, b);
    std::optional<LiveBlock> replaced;
    if (!inserted) {
        replaced = it->second;
        account(it->second, false);
        it->second = b;
    }
    account(b, true);
    return replaced;
}

std::optional<LiveBlock> BlockTable::remove(uintptr_t addr) {
    Shard& s = shards_[shard_of(addr)];
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.blocks.find(addr);
    if (it == s.blocks.end()) return std::nullopt;
    LiveBlock b = it->second;
    s.blocks.erase(it);
    account(b, false);
    return b;
}

uint64_t BlockTable::gpu_live_bytes(int device) const noexcept {
    return gpu_live_[device_slot(device)].load(std::memory_order_relaxed);
}

uint64_t BlockTable::gpu_peak_bytes(int device) const noexcept {
    return gpu_peak_[device_slot(device)].load(std::memory_order_relaxed);
}

void BlockTable::reset_gpu_peak(int device) noexcept {
    const size_t slot = device_slot(device);
    gpu_peak_[slot].store(gpu_live_[slot].load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void BlockTable::clear() {
    for (auto& s : shards_) s.blocks.clear();
    for (auto& c : gpu_live_) c.store(0, std::memory_order_relaxed);
    for (auto& c : gpu_peak_) c.store(0, std::memory_order_relaxed);
}

void BlockTable::lock_all() {
    for (auto& s : shards_) s.mu.lock();
}

void BlockTable::unlock_all() {
    for (auto& s : shards_) s.mu.unlock();
}

}  // namespace memguard::track

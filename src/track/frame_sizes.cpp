#include "track/frame_sizes.h"

#include <new>

namespace memguard::track {

namespace {

constexpr int64_t kLargestFrame = int64_t{1} << 24;  // a larger step up the stack is not a frame

size_t home(uint64_t k, unsigned log2) noexcept { return (k * 0x9e3779b97f4a7c15ULL) >> (64 - log2); }

}  // namespace

const FrameSizes::Entry* FrameSizes::find(uint64_t k) const noexcept {
    size_t i = home(k, kCapacityLog2);
    for (int p = 0; p < kProbes; ++p, i = (i + 1) & (kCapacity - 1)) {
        uint64_t at = entries_[i].key.load(std::memory_order_acquire);
        if (at == k) return &entries_[i];
        if (at == 0) return nullptr;
    }
    return nullptr;
}

int32_t FrameSizes::size_of(uintptr_t ip, uintptr_t slot) const noexcept {
    const Entry* e = find(key(ip, slot));
    return e ? e->size.load(std::memory_order_relaxed) : 0;
}

void FrameSizes::store(uint64_t k, int32_t size) noexcept {
    size_t i = home(k, kCapacityLog2);
    for (int p = 0; p < kProbes; ++p, i = (i + 1) & (kCapacity - 1)) {
        uint64_t at = entries_[i].key.load(std::memory_order_acquire);
        if (at == 0 && entries_[i].key.compare_exchange_strong(at, k, std::memory_order_acq_rel)) at = k;
        if (at != k) continue;
        std::atomic<int32_t>& s = entries_[i].size;
        int32_t was = 0;
        // A first size is kept; a different one (or unusable) makes the key unusable for good.
        if (!s.compare_exchange_strong(was, size, std::memory_order_relaxed) && was != size) {
            s.store(kUnusable, std::memory_order_relaxed);
        }
        return;
    }
    full_.store(true, std::memory_order_relaxed);
}

void FrameSizes::learn(const uintptr_t* ips, const uintptr_t* slots, int n) noexcept {
    for (int i = 0; i + 1 < n; ++i) {
        if (slots[i] == 0) continue;
        const int64_t size = slots[i + 1] == 0 ? 0 : static_cast<int64_t>(slots[i + 1] - slots[i]);
        const bool usable = size > 0 && size < kLargestFrame && size % sizeof(uintptr_t) == 0;
        store(key(ips[i], slots[i]), usable ? static_cast<int32_t>(size) : kUnusable);
    }
}

FrameSizes::Walk FrameSizes::walk(const uintptr_t* ips, int n, uintptr_t slot0, uintptr_t lo, uintptr_t hi,
                                  uintptr_t* slots) noexcept {
    if (n <= 0) return Walk::Unusable;
    uintptr_t slot = slot0;
    for (int i = 0;; ++i) {
        if (slot < lo || slot > hi - sizeof(uintptr_t)) return Walk::Unusable;
        if (*reinterpret_cast<const uintptr_t*>(slot) != ips[i]) {
            // The size that led here put the return address elsewhere: never used again.
            if (i > 0) give_up(ips[i - 1], slots[i - 1]);
            return Walk::Unusable;
        }
        slots[i] = slot;
        if (i + 1 == n) return Walk::Found;
        const Entry* e = find(key(ips[i], slot));
        const int32_t size = e ? e->size.load(std::memory_order_relaxed) : 0;
        if (size < 0) return Walk::Unusable;
        if (size == 0) return full_.load(std::memory_order_relaxed) ? Walk::Unusable : Walk::Unknown;
        slot += static_cast<uintptr_t>(size);
    }
}

}  // namespace memguard::track

namespace memguard::track {

FrameSizes* LazyFrameSizes::make() noexcept {
    auto* made = new (std::nothrow) FrameSizes();
    if (made == nullptr) return nullptr;
    FrameSizes* was = nullptr;
    if (table_.compare_exchange_strong(was, made, std::memory_order_acq_rel)) return made;
    delete made;  // another thread made it first
    return was;
}

}  // namespace memguard::track

// Address -> pointer hash map for the allocator's pointer lookup: open addressing with linear
// probing and backward-shift deletion, so that lookups touch one or two cache lines and inserting
// or erasing allocates nothing in the steady state (std::unordered_map allocates a node each time).
// Not thread-safe: each device allocator guards its map of live blocks with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memguard::alloc {

class PtrMap {
public:
    /// The value stored for key, or nullptr. Key 0 is never stored.
    void* find(uintptr_t key) const noexcept {
        if (slots_.empty()) return nullptr;
        for (size_t i = home(key);; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.key == key) return s.value;
            if (s.key == 0) return nullptr;
        }
    }

    /// Makes room for one more key, so that the next insert() does not allocate (or throw).
    void reserve_one() {
        if ((count_ + 1) * 2 > slots_.size()) grow();
    }

    /// Stores value for key (replacing any value it had). key must not be 0.
    void insert(uintptr_t key, void* value) {
        reserve_one();
        size_t i = home(key);
        while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask_;
        if (slots_[i].key == 0) ++count_;
        slots_[i] = Slot{key, value};
    }

    /// Removes key; returns its value, or nullptr when absent.
    void* erase(uintptr_t key) noexcept {
        if (slots_.empty()) return nullptr;
        size_t i = home(key);
        while (slots_[i].key != key) {
            if (slots_[i].key == 0) return nullptr;
            i = (i + 1) & mask_;
        }
        void* value = slots_[i].value;
        // Shift later members of the probe run back so that no lookup stops early at the hole.
        for (size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
            const size_t h = home(slots_[j].key);
            const bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
            if (!stays) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i] = Slot{};
        --count_;
        return value;
    }

    size_t size() const noexcept { return count_; }

private:
    struct Slot {
        uintptr_t key = 0;
        void* value = nullptr;
    };

    static size_t home(uintptr_t key, unsigned shift, size_t mask) noexcept {
        // Block addresses are multiples of 512; the multiplier spreads the rest over the table.
        return static_cast<size_t>(((key >> 9) * 0xC2B2AE3D27D4EB4Full) >> shift) & mask;
    }
    size_t home(uintptr_t key) const noexcept { return home(key, shift_, mask_); }

    /// Doubles the table. The new one is filled before it replaces the old, so a failed
    /// allocation (std::bad_alloc) leaves the map as it was.
    void grow() {
        const size_t cap = slots_.empty() ? 64 : slots_.size() * 2;
        std::vector<Slot> fresh(cap);
        const size_t mask = cap - 1;
        const unsigned shift = 64 - static_cast<unsigned>(__builtin_ctzll(cap));
        for (const Slot& s : slots_) {
            if (s.key == 0) continue;
            size_t i = home(s.key, shift, mask);
            while (fresh[i].key != 0) i = (i + 1) & mask;
            fresh[i] = s;
        }
        slots_.swap(fresh);
        mask_ = mask;
        shift_ = shift;
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    unsigned shift_ = 64;
    size_t count_ = 0;
};

}  // namespace memguard::alloc

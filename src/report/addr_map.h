// A hash map from 64-bit keys (addresses) to small values, for the parser's live and freed blocks.
// Open addressing with linear probing and backward-shift deletion, in one array: std::unordered_map
// allocates a node per insert and chases a pointer per lookup, which cost a quarter of the reading
// time of an allocation churn (perf, docs/benchmarks.md, issue 23), and no flat hash map library is
// a dependency of memguard. Private to report/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memguard::report {

template <class V>
class AddrMap {
public:
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    /// The value of `key`, or null.
    V* find(uint64_t key) {
        if (size_ == 0) return nullptr;
        for (size_t i = home(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.used) return nullptr;
            if (s.key == key) return &s.value;
        }
    }
    const V* find(uint64_t key) const { return const_cast<AddrMap*>(this)->find(key); }
    bool contains(uint64_t key) const { return find(key) != nullptr; }

    /// The value of `key`, inserted (value-initialized) when absent.
    V& operator[](uint64_t key) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        for (size_t i = home(key);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (!s.used) {
                s.used = true;
                s.key = key;
                s.value = V{};
                ++size_;
                return s.value;
            }
            if (s.key == key) return s.value;
        }
    }

    /// Removes `key`; false when absent.
    bool erase(uint64_t key) {
        if (size_ == 0) return false;
        size_t i = home(key);
        for (;; i = (i + 1) & mask_) {
            if (!slots_[i].used) return false;
            if (slots_[i].key == key) break;
        }
        // Backward shift: move later entries of the probe run into the hole when their home allows.
        size_t hole = i;
        for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
            const size_t h = home(slots_[j].key);
            // j's entry may fill the hole when its home is not in (hole, j] (cyclically).
            const bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
            if (movable) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole].used = false;
        --size_;
        return true;
    }

    void clear() {
        slots_.clear();
        size_ = 0;
        mask_ = 0;
    }

    /// Calls f(key, value) for every entry, in no particular order.
    template <class F>
    void for_each(F f) const {
        for (const Slot& s : slots_) {
            if (s.used) f(s.key, s.value);
        }
    }

private:
    struct Slot {
        uint64_t key = 0;
        V value{};
        bool used = false;
    };

    size_t home(uint64_t key) const {
        // Addresses share their low bits (alignment) and high bits (the mapping): mixed (murmur3's
        // finalizer) so that every bit decides the slot.
        key ^= key >> 33;
        key *= 0xff51afd7ed558ccdull;
        key ^= key >> 33;
        return static_cast<size_t>(key) & mask_;
    }

    void grow() {
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
        mask_ = slots_.size() - 1;
        size_ = 0;
        for (const Slot& s : old) {
            if (s.used) (*this)[s.key] = s.value;
        }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
    size_t mask_ = 0;
};

}  // namespace memguard::report

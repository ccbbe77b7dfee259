// How far up the stack each frame's return address lies from its callee's, learned from the
// unwinder's cursor, so that StackMemo's misses find a stack's slots without the cursor.
//
// A StackMemo entry needs every frame's slot (where its return address was read). Only libunwind's
// cursor says where, at tens of microseconds per stack (it validates each address it reads and
// locks its global cache per frame), against a few hundred nanoseconds for its fast trace of the
// same return addresses. But a frame's slot follows from the one below it: a function running at
// return address `ip`, whose callee's return address sits at `slot`, keeps its own return address
// `size(ip)` bytes higher, where size is what the function's frame takes at that call: fixed by
// its code, and by the stack's alignment for a function that realigns its frame. So the sizes are
// learned once per return address and alignment (from a cursor's slots), and a miss then costs a
// fast trace plus one lookup and one compare per frame.
//
// What keeps it exact: a size is used only where it was learned from the cursor, per return
// address and slot alignment (the slot's address modulo 64); every slot it gives must hold the
// return address the fast trace read there, or the stack is not remembered and that size is never
// used again; a return address seen with two sizes (alloca, a variable-length array) is never
// used again either. The sizes are facts of the code loaded at those addresses: shared by all
// threads, never forgotten (a library unloaded and another loaded in its place is caught by the
// compare, as a stale StackMemo entry is).
//
// Threads: lock-free (an open-addressing table of atomics); any thread learns and looks up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memguard::track {

class FrameSizes {
public:
    static constexpr unsigned kCapacityLog2 = 14;  // 16384 return addresses and alignments
    static constexpr int kProbes = 16;

    enum class Walk {
        Found,     // every slot found, each holding its frame's return address
        Unknown,   // a frame's size is not known yet: the cursor would teach it
        Unusable,  // a frame's size is unusable (unstable, or the table is full), or a slot
                   // did not hold its return address: remember nothing, and do not ask the cursor
    };

    /// The slots of the `n` frames `ips` (innermost first; `ips[0]` read from `slot0`), each found
    /// from the one below it, all inside [lo, hi) and read there: Found fills `slots`. A slot
    /// that does not hold its frame's return address makes the size that gave it unusable.
    Walk walk(const uintptr_t* ips, int n, uintptr_t slot0, uintptr_t lo, uintptr_t hi, uintptr_t* slots) noexcept;
    /// Learns the sizes of an unwind with slots (`slots[i]` 0 where the unwinder could not say):
    /// frame i's from slots i and i+1; a frame below an unknown slot becomes unusable.
    void learn(const uintptr_t* ips, const uintptr_t* slots, int n) noexcept;
    /// Makes frame `ip` at callee slot `slot` unusable (a cursor did not teach its size).
    void give_up(uintptr_t ip, uintptr_t slot) noexcept { store(key(ip, slot), kUnusable); }

    /// For tests: the learned size, 0 when unknown, -1 when unusable.
    int32_t size_of(uintptr_t ip, uintptr_t slot) const noexcept;

private:
    static constexpr int32_t kUnusable = -1;
    static constexpr size_t kCapacity = size_t{1} << kCapacityLog2;
    struct Entry {
        std::atomic<uint64_t> key{0};  // 0: empty
        std::atomic<int32_t> size{0};  // 0: not learned yet
    };
    static uint64_t key(uintptr_t ip, uintptr_t slot) noexcept {
        // User-space return addresses fit 61 bits; the slot's alignment class (8-byte units of 64)
        // fills the low three.
        return (static_cast<uint64_t>(ip) << 3) | ((slot >> 3) & 7);
    }
    const Entry* find(uint64_t k) const noexcept;
    /// Sets a key's size: a first size is kept, another one makes it unusable; a full table
    /// keeps nothing (the table then says Unusable for keys it lacks).
    void store(uint64_t k, int32_t size) noexcept;

    Entry entries_[kCapacity];
    std::atomic<bool> full_{false};
};

}  // namespace memguard::track

namespace memguard::track {

/// A FrameSizes made on first use (256 KiB, only where StackMemo misses), freed with its owner.
class LazyFrameSizes {
public:
    LazyFrameSizes() = default;
    LazyFrameSizes(const LazyFrameSizes&) = delete;
    LazyFrameSizes& operator=(const LazyFrameSizes&) = delete;
    ~LazyFrameSizes() { delete table_.load(std::memory_order_acquire); }
    /// The table; nullptr when it cannot be made (no memory).
    FrameSizes* get() noexcept {
        FrameSizes* t = table_.load(std::memory_order_acquire);
        return __builtin_expect(t != nullptr, 1) ? t : make();
    }

private:
    FrameSizes* make() noexcept;
    std::atomic<FrameSizes*> table_{nullptr};
};

}  // namespace memguard::track

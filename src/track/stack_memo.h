// A thread's recent native stacks, found again without unwinding (allocator mode's hot path).
//
// An allocation's native stack is a chain of return addresses, each read from a stack slot. When
// the hook's own return address sits in the same slot as for an earlier allocation of this thread
// and every slot of that earlier stack still holds the return address it held then, unwinding
// again reads the same chain: each frame's canonical frame address follows from its return
// address and where that was stored, and the next return address is read from there. So the memo
// keeps, per remembered stack, its slots, its return addresses and its interned id, and a lookup
// is one load and one compare per frame, instead of an unwind (libunwind's fast trace, about
// 12-35 ns per frame) and interning (a hash and a shard lock).
//
// What keeps it exact: the key is the slot of the hook's return address and the address in it;
// every slot of the stack is compared, innermost first; the slots are inside this thread's stack
// (bounds read once per thread; a stack elsewhere, such as a fiber's, is never remembered); entries
// carry the recorder's epoch (a fork child's new report, the native cut), so no stale id survives.
// A stack whose slots the unwinder cannot name (a signal frame) is never remembered.
//
// Threads: each thread owns its memo (created on its first remembered stack, freed at thread
// exit); nothing is shared, nothing is locked.
#pragma once

#include <cstdint>

namespace memguard::track {

class StackMemo {
public:
    static constexpr int kMaxFrames = 64;  // deeper stacks are not remembered
    // Allocations at one stack depth share the key's first return address (PyTorch's pluggable
    // allocator calls memguard_alloc from one place) and differ above it: several ways per set.
    static constexpr int kSets = 32;
    static constexpr int kWays = 8;

    /// The calling thread's memo, created on first use; nullptr when it cannot be (no memory, or
    /// the thread's stack bounds are unknown).
    static StackMemo* for_this_thread() noexcept;

    /// The id of a remembered stack of `epoch` whose first return address is stored at `slot0`
    /// and whose every frame is still in place; 0 if none. May turn itself off for a while when
    /// most lookups miss (then it answers 0 without looking, and remember() does nothing).
    uint32_t find(const uintptr_t* slot0, uint32_t epoch) noexcept;
    /// This thread's stack: [stack_lo, stack_hi).
    uintptr_t stack_lo() const noexcept { return lo_; }
    uintptr_t stack_hi() const noexcept { return hi_; }
    /// Whether remember() would keep a stack now (false while turned off).
    bool remembering() const noexcept { return off_for_ == 0; }
    /// Remembers the interned stack `id` of `epoch`: `n` frames, `ips[i]` read from `slots[i]`.
    /// Ignored when a slot is 0 or outside this thread's stack, or n is 0 or above kMaxFrames.
    void remember(const uintptr_t* slots, const uintptr_t* ips, int n, uint32_t id, uint32_t epoch) noexcept;

    // Counters, for tests and benchmarks: this thread's, and every thread's (summed each window
    // of lookups and when a thread exits).
    uint64_t hits() const noexcept { return hits_; }
    uint64_t misses() const noexcept { return misses_; }
    static void totals(uint64_t* hits, uint64_t* misses) noexcept;
    ~StackMemo() { publish(); }

    StackMemo(uintptr_t stack_lo, uintptr_t stack_hi) noexcept : lo_(stack_lo), hi_(stack_hi) {}

private:
    struct Entry {
        uint32_t id = 0;  // 0: empty
        uint32_t epoch = 0;
        int n = 0;
        uintptr_t slots[kMaxFrames];
        uintptr_t ips[kMaxFrames];
    };
    struct Set {
        uint8_t order[kWays] = {0, 1, 2, 3, 4, 5, 6, 7};  // ways, most recently used first
        Entry ways[kWays];
    };
    static_assert(kWays == 8, "Set::order lists every way");
    /// Moves the way at position `pos` of the set's order to the front.
    static void touch(Set& set, int pos) noexcept;
    static unsigned set_of(uintptr_t slot0, uintptr_t ip0) noexcept;
    void publish() noexcept;  // adds this thread's counts since the last publish to the totals
    uint64_t published_hits_ = 0, published_misses_ = 0;
    void count(bool hit) noexcept;

    uintptr_t lo_, hi_;  // this thread's stack
    Set sets_[kSets];
    uint64_t hits_ = 0, misses_ = 0;
    uint32_t window_lookups_ = 0, window_misses_ = 0;
    uint32_t off_for_ = 0;     // lookups left while turned off
    uint32_t off_length_ = 0;  // how long the last time off was (doubles while windows keep missing)
};

}  // namespace memguard::track

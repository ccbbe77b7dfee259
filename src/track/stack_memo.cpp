#include "track/stack_memo.h"

#include <pthread.h>

#include <atomic>
#include <new>

namespace memguard::track {

namespace {

constexpr uint32_t kWindow = 1024;             // lookups per verdict on the hit rate
constexpr uint32_t kMostMissed = kWindow / 2;  // more misses than this in a window: turn off
constexpr uint32_t kFirstOff = 16384;          // lookups turned off after the first bad window
constexpr uint32_t kLongestOff = 1u << 22;

/// Owns the calling thread's memo; frees it when the thread exits. Only a pointer lives in
/// thread-local storage (the memo itself would not fit the static TLS that dlopen leaves).
struct ThreadMemo {
    StackMemo* memo = nullptr;
    bool tried = false;
    ~ThreadMemo() {
        // An allocation later in this thread's exit (another thread-local's destructor) finds no
        // memo and unwinds.
        delete memo;
        memo = nullptr;
        tried = true;
    }
};
thread_local ThreadMemo t_memo;

std::atomic<uint64_t> g_hits{0}, g_misses{0};

}  // namespace

void StackMemo::totals(uint64_t* hits, uint64_t* misses) noexcept {
    *hits = g_hits.load(std::memory_order_relaxed);
    *misses = g_misses.load(std::memory_order_relaxed);
}

void StackMemo::publish() noexcept {
    g_hits.fetch_add(hits_ - published_hits_, std::memory_order_relaxed);
    g_misses.fetch_add(misses_ - published_misses_, std::memory_order_relaxed);
    published_hits_ = hits_;
    published_misses_ = misses_;
}

StackMemo* StackMemo::for_this_thread() noexcept {
    if (__builtin_expect(t_memo.memo != nullptr, 1)) return t_memo.memo;
    if (t_memo.tried) return nullptr;
    t_memo.tried = true;
    // The thread's stack, so that no slot outside it is ever read (a fiber's stack may be freed).
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
    void* base = nullptr;
    size_t size = 0;
    int rc = pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0 || base == nullptr || size == 0) return nullptr;
    auto lo = reinterpret_cast<uintptr_t>(base);
    t_memo.memo = new (std::nothrow) StackMemo(lo, lo + size);
    return t_memo.memo;
}

void StackMemo::touch(Set& set, int pos) noexcept {
    uint8_t way = set.order[pos];
    for (int i = pos; i > 0; --i) set.order[i] = set.order[i - 1];
    set.order[0] = way;
}

unsigned StackMemo::set_of(uintptr_t slot0, uintptr_t ip0) noexcept {
    uint64_t h = (static_cast<uint64_t>(slot0) ^ (static_cast<uint64_t>(ip0) << 7)) * 0x9e3779b97f4a7c15ULL;
    return static_cast<unsigned>(h >> 58) % kSets;
}

void StackMemo::count(bool hit) noexcept {
    if (hit) {
        ++hits_;
    } else {
        ++misses_;
        ++window_misses_;
    }
    if (++window_lookups_ < kWindow) return;
    publish();
    if (window_misses_ > kMostMissed) {
        // This thread's stacks do not repeat enough for the memo to pay for its misses (finding
        // and remembering slots, sometimes the cursor): off for a while, longer each time it
        // happens again in a row.
        off_length_ = off_length_ == 0 ? kFirstOff : (off_length_ < kLongestOff ? off_length_ * 2 : kLongestOff);
        off_for_ = off_length_;
    } else {
        off_length_ = 0;
    }
    window_lookups_ = window_misses_ = 0;
}

uint32_t StackMemo::find(const uintptr_t* slot0, uint32_t epoch) noexcept {
    if (off_for_ > 0) {
        --off_for_;
        return 0;
    }
    auto s0 = reinterpret_cast<uintptr_t>(slot0);
    if (s0 < lo_ || s0 >= hi_) return 0;  // not on this thread's stack: never remembered
    uintptr_t ip0 = *slot0;
    Set& set = sets_[set_of(s0, ip0)];
    for (int pos = 0; pos < kWays; ++pos) {
        const Entry& e = set.ways[set.order[pos]];
        if (e.id == 0) break;  // the rest of the order is unused too
        if (e.epoch != epoch || e.slots[0] != s0 || e.ips[0] != ip0) continue;
        int i = 1;
        while (i < e.n && *reinterpret_cast<const uintptr_t*>(e.slots[i]) == e.ips[i]) ++i;
        if (i == e.n) {
            uint32_t id = e.id;
            touch(set, pos);
            count(true);
            return id;
        }
    }
    count(false);
    return 0;
}

void StackMemo::remember(const uintptr_t* slots, const uintptr_t* ips, int n, uint32_t id, uint32_t epoch) noexcept {
    if (off_for_ > 0 || id == 0 || n <= 0 || n > kMaxFrames) return;
    for (int i = 0; i < n; ++i) {
        // Slots go up the stack, each inside this thread's stack.
        if (slots[i] < lo_ || slots[i] + sizeof(uintptr_t) > hi_ || (i > 0 && slots[i] <= slots[i - 1])) return;
    }
    Set& set = sets_[set_of(slots[0], ips[0])];
    // The least recently used way (unused ones are last in the order), now the most recent.
    touch(set, kWays - 1);
    Entry& e = set.ways[set.order[0]];
    e.id = id;
    e.epoch = epoch;
    e.n = n;
    for (int i = 0; i < n; ++i) {
        e.slots[i] = slots[i];
        e.ips[i] = ips[i];
    }
}

}  // namespace memguard::track

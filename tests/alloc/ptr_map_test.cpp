// PtrMap against std::unordered_map under random inserts, lookups and erases, with keys shaped
// like block addresses (multiples of 512, clustered), so that probe runs wrap and collide.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <random>
#include <unordered_map>
#include <vector>

#include "alloc/ptr_map.h"

// This test binary's operator new can be told to fail once, as when host memory runs out.
// (GCC takes the malloc/free pair of a replaced operator new/delete for a mismatch.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
namespace {
thread_local bool t_fail_next_new = false;
}  // namespace

void* operator new(std::size_t n) {
    if (t_fail_next_new) {
        t_fail_next_new = false;
        throw std::bad_alloc();
    }
    if (void* p = std::malloc(n != 0 ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace memguard::alloc {
namespace {

TEST(PtrMap, MatchesUnorderedMap) {
    std::mt19937_64 rng(42);
    PtrMap map;
    std::unordered_map<uintptr_t, void*> ref;
    std::vector<uintptr_t> keys;
    const uintptr_t base = uintptr_t{0x7f00} << 32;
    for (int i = 0; i < 200000; ++i) {
        const unsigned op = static_cast<unsigned>(rng() % 10);
        if (op < 5 || keys.empty()) {
            const uintptr_t k = base + (rng() % 4096) * 512;
            void* v = reinterpret_cast<void*>(rng() | 1);
            if (!ref.count(k)) keys.push_back(k);
            ref[k] = v;
            map.insert(k, v);
        } else if (op < 8) {
            const size_t j = rng() % keys.size();
            const uintptr_t k = keys[j];
            keys[j] = keys.back();
            keys.pop_back();
            ASSERT_EQ(map.erase(k), ref[k]);
            ref.erase(k);
            ASSERT_EQ(map.erase(k), nullptr);
        } else {
            const uintptr_t k = base + (rng() % 4096) * 512;
            auto it = ref.find(k);
            ASSERT_EQ(map.find(k), it == ref.end() ? nullptr : it->second);
        }
        ASSERT_EQ(map.size(), ref.size());
    }
    for (const auto& [k, v] : ref) ASSERT_EQ(map.find(k), v);
}

// The allocator reserves room before it takes a block; when that growth fails (host memory ran
// out) the map must keep every live block, or their frees would be lost.
TEST(PtrMap, AFailedGrowKeepsEveryKey) {
    PtrMap map;
    auto value = [](uintptr_t i) { return reinterpret_cast<void*>(i * 16 + 8); };
    for (uintptr_t i = 1; i <= 32; ++i) map.insert(i * 512, value(i));  // 64 slots: the next one grows
    t_fail_next_new = true;
    EXPECT_THROW(map.reserve_one(), std::bad_alloc);
    t_fail_next_new = false;
    ASSERT_EQ(map.size(), 32u);
    for (uintptr_t i = 1; i <= 32; ++i) ASSERT_EQ(map.find(i * 512), value(i)) << i;
    map.reserve_one();
    map.insert(33 * 512, value(33));
    ASSERT_EQ(map.size(), 33u);
    for (uintptr_t i = 1; i <= 33; ++i) ASSERT_EQ(map.find(i * 512), value(i)) << i;
    EXPECT_EQ(map.erase(5 * 512), value(5));
    EXPECT_EQ(map.find(5 * 512), nullptr);
}

TEST(PtrMap, EmptyMapFindsNothing) {
    PtrMap map;
    EXPECT_EQ(map.find(512), nullptr);
    EXPECT_EQ(map.erase(512), nullptr);
    EXPECT_EQ(map.size(), 0u);
}

}  // namespace
}  // namespace memguard::alloc

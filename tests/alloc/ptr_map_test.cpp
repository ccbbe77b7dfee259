// PtrMap against std::unordered_map under random inserts, lookups and erases, with keys shaped
// like block addresses (multiples of 512, clustered), so that probe runs wrap and collide.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "alloc/ptr_map.h"

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

TEST(PtrMap, EmptyMapFindsNothing) {
    PtrMap map;
    EXPECT_EQ(map.find(512), nullptr);
    EXPECT_EQ(map.erase(512), nullptr);
    EXPECT_EQ(map.size(), 0u);
}

}  // namespace
}  // namespace memguard::alloc

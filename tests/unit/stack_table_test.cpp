#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "track/stack_table.h"

using memguard::track::StackTable;

namespace {
struct NewStacks {
    std::atomic<int> calls{0};
    static void on_new(void* self, uint32_t, const uintptr_t*, int) {
        static_cast<NewStacks*>(self)->calls.fetch_add(1);
    }
};
}  // namespace

TEST(StackTable, SameStackSameIdDistinctStacksDistinctIds) {
    StackTable table;
    NewStacks seen;
    uintptr_t a[] = {1, 2, 3};
    uintptr_t b[] = {1, 2, 4};
    uintptr_t c[] = {1, 2};
    uint32_t ia = table.intern(a, 3, &NewStacks::on_new, &seen);
    uint32_t ib = table.intern(b, 3, &NewStacks::on_new, &seen);
    uint32_t ic = table.intern(c, 2, &NewStacks::on_new, &seen);
    EXPECT_EQ(table.intern(a, 3, &NewStacks::on_new, &seen), ia);
    EXPECT_EQ(ia, 1u);
    EXPECT_NE(ia, ib);
    EXPECT_NE(ia, ic);
    EXPECT_NE(ib, ic);
    EXPECT_EQ(seen.calls.load(), 3);
    EXPECT_EQ(table.size(), 3u);
}

TEST(StackTable, FramesOfReturnsTheAskedStacksOnly) {
    StackTable table;
    uintptr_t a[] = {1, 2, 3};
    uintptr_t b[] = {4};
    uintptr_t c[] = {5, 6};
    uint32_t ia = table.intern(a, 3, nullptr, nullptr);
    table.intern(b, 1, nullptr, nullptr);
    uint32_t ic = table.intern(c, 2, nullptr, nullptr);
    std::unordered_map<uint32_t, std::vector<uintptr_t>> out;
    table.frames_of({ia, ic, 99}, &out);
    EXPECT_EQ(out.size(), 2u);
    EXPECT_EQ(out[ia], (std::vector<uintptr_t>{1, 2, 3}));
    EXPECT_EQ(out[ic], (std::vector<uintptr_t>{5, 6}));
}

TEST(StackTable, ClearStartsOverAtOne) {
    StackTable table;
    uintptr_t a[] = {9, 8};
    table.intern(a, 2, nullptr, nullptr);
    table.clear();
    EXPECT_EQ(table.size(), 0u);
    uintptr_t b[] = {7};
    EXPECT_EQ(table.intern(b, 1, nullptr, nullptr), 1u);
}

TEST(StackTable, ConcurrentInterningAgreesOnIds) {
    StackTable table;
    NewStacks seen;
    constexpr int kThreads = 8, kStacks = 500;
    std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kStacks));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 3; ++round) {
                for (int i = 0; i < kStacks; ++i) {
                    int s = (i + t * 37) % kStacks;
                    uintptr_t frames[4] = {0x1000u + static_cast<uintptr_t>(s), 0x2000, 0x3000,
                                           static_cast<uintptr_t>(s % 7)};
                    ids[t][s] = table.intern(frames, 4, &NewStacks::on_new, &seen);
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(seen.calls.load(), kStacks);
    EXPECT_EQ(table.size(), static_cast<uint32_t>(kStacks));
    std::set<uint32_t> distinct(ids[0].begin(), ids[0].end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(kStacks));
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(ids[t], ids[0]);
}

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "track/block_table.h"

using memguard::track::BlockTable;
using memguard::track::Kind;
using memguard::track::LiveBlock;

TEST(BlockTable, InsertRemoveAndLiveBytesPerDevice) {
    BlockTable t;
    t.insert(0x1000, LiveBlock{512, 1, Kind::Device, 0});
    t.insert(0x2000, LiveBlock{256, 2, Kind::Async, 1});
    t.insert(0x3000, LiveBlock{1024, 3, Kind::Managed, 0});
    t.insert(0x4000, LiveBlock{4096, 4, Kind::Pinned, -1});
    EXPECT_EQ(t.gpu_live_bytes(0), 1536u);
    EXPECT_EQ(t.gpu_live_bytes(1), 256u);
    auto b = t.remove(0x1000);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->size, 512u);
    EXPECT_EQ(b->stack_id, 1u);
    EXPECT_FALSE(t.remove(0x1000));
    EXPECT_EQ(t.gpu_live_bytes(0), 1024u);
    ASSERT_TRUE(t.remove(0x4000));
    EXPECT_EQ(t.gpu_live_bytes(0), 1024u);
}

TEST(BlockTable, ReinsertAtSameAddressReplacesAndReturnsTheOldBlock) {
    BlockTable t;
    EXPECT_FALSE(t.insert(0x1000, LiveBlock{512, 1, Kind::Device, 0}));
    auto old = t.insert(0x1000, LiveBlock{128, 2, Kind::Device, 0});
    ASSERT_TRUE(old);
    EXPECT_EQ(old->size, 512u);
    EXPECT_EQ(t.gpu_live_bytes(0), 128u);
}

TEST(BlockTable, ConcurrentThreadsKeepExactCounts) {
    BlockTable t;
    constexpr int kThreads = 8, kBlocks = 2000;
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th) {
        threads.emplace_back([&, th] {
            for (int i = 0; i < kBlocks; ++i) {
                uintptr_t addr = (static_cast<uintptr_t>(th) << 32) | (static_cast<uintptr_t>(i) << 8);
                t.insert(addr, LiveBlock{256, 0, Kind::Device, 0});
                if (i % 2) ASSERT_TRUE(t.remove(addr));
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(t.gpu_live_bytes(0), uint64_t{kThreads} * (kBlocks / 2) * 256);
}

TEST(BlockTable, PeakSinceResetPerDevice) {
    BlockTable t;
    t.insert(0x1000, LiveBlock{512, 1, Kind::Device, 0});
    t.insert(0x2000, LiveBlock{1024, 2, Kind::Device, 0});
    t.insert(0x3000, LiveBlock{4096, 3, Kind::Pinned, 0});  // not GPU memory: no peak
    t.insert(0x4000, LiveBlock{256, 4, Kind::Async, 1});
    ASSERT_TRUE(t.remove(0x2000));
    EXPECT_EQ(t.gpu_peak_bytes(0), 1536u);
    EXPECT_EQ(t.gpu_peak_bytes(1), 256u);
    t.reset_gpu_peak(0);
    EXPECT_EQ(t.gpu_peak_bytes(0), 512u) << "a reset starts the peak at the bytes live now";
    EXPECT_EQ(t.gpu_peak_bytes(1), 256u) << "another device's peak is its own";
    t.insert(0x5000, LiveBlock{128, 5, Kind::Device, 0});
    ASSERT_TRUE(t.remove(0x5000));
    t.insert(0x6000, LiveBlock{64, 6, Kind::Managed, 0});
    EXPECT_EQ(t.gpu_peak_bytes(0), 640u);
    t.insert(0x1000, LiveBlock{2048, 7, Kind::Device, 0});  // replaces the 512-byte block
    EXPECT_EQ(t.gpu_peak_bytes(0), 2112u);
}

TEST(BlockTable, ConcurrentPeakIsTheMostLiveAtOnce) {
    BlockTable t;
    constexpr int kThreads = 8, kRounds = 2000;
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th) {
        threads.emplace_back([&, th] {
            for (int i = 0; i < kRounds; ++i) {
                uintptr_t addr = (static_cast<uintptr_t>(th) << 32) | (static_cast<uintptr_t>(i) << 8);
                t.insert(addr, LiveBlock{256, 0, Kind::Device, 0});
                ASSERT_TRUE(t.remove(addr));
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(t.gpu_live_bytes(0), 0u);
    // Each thread has at most one block live: the peak is at least one block, at most one each.
    EXPECT_GE(t.gpu_peak_bytes(0), 256u);
    EXPECT_LE(t.gpu_peak_bytes(0), uint64_t{kThreads} * 256);
}

// PhaseTable: ids and which phases are open (src/track/phases.h).
#include "track/phases.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

using memguard::track::cut_phase_name;
using memguard::track::kMaxPhaseName;
using memguard::track::PhaseSource;
using memguard::track::PhaseTable;

TEST(PhaseTable, IdsStartAtOneAndCloseOnce) {
    PhaseTable t;
    uint64_t a = t.open(), b = t.open();
    EXPECT_EQ(a, 1u);
    EXPECT_EQ(b, 2u);
    EXPECT_EQ(t.open_count(), 2u);
    EXPECT_TRUE(t.close(b));    // out of order: ranges may overlap
    EXPECT_FALSE(t.close(b));   // ended twice
    EXPECT_FALSE(t.close(0));   // "not recording"
    EXPECT_FALSE(t.close(77));  // never handed out
    EXPECT_TRUE(t.close(a));
    EXPECT_EQ(t.open_count(), 0u);
}

TEST(PhaseTable, ForkChildForgetsOpenPhasesButIdsKeepCounting) {
    PhaseTable t;
    uint64_t parent = t.open();
    t.clear_open();
    EXPECT_FALSE(t.close(parent));
    EXPECT_GT(t.open(), parent);
}

TEST(PhaseTable, ConcurrentIdsAreUnique) {
    PhaseTable t;
    std::vector<std::vector<uint64_t>> got(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            for (int k = 0; k < 1000; ++k) got[i].push_back(t.open());
            for (uint64_t id : got[i]) EXPECT_TRUE(t.close(id));
        });
    }
    for (auto& th : threads) th.join();
    std::set<uint64_t> all;
    for (auto& v : got) all.insert(v.begin(), v.end());
    EXPECT_EQ(all.size(), 4000u);
    EXPECT_EQ(*all.begin(), 1u);
    EXPECT_EQ(*all.rbegin(), 4000u);
    EXPECT_EQ(t.open_count(), 0u);
}

TEST(PhaseNames, SourcesAsInTheFormat) {
    EXPECT_STREQ(phase_source_name(PhaseSource::Api), "api");
    EXPECT_STREQ(phase_source_name(PhaseSource::Nvtx), "nvtx");
    EXPECT_STREQ(phase_source_name(PhaseSource::NvtxRange), "nvtx_range");
}

TEST(PhaseNames, LongNamesAreCutAtACharacterBoundary) {
    EXPECT_EQ(cut_phase_name("forward"), "forward");
    std::string ascii(kMaxPhaseName + 10, 'x');
    EXPECT_EQ(cut_phase_name(ascii).size(), kMaxPhaseName);
    // "é" is two bytes: with an odd prefix the cut would fall inside one.
    std::string utf8 = "a";
    while (utf8.size() < kMaxPhaseName + 4) utf8 += "\xc3\xa9";
    std::string_view cut = cut_phase_name(utf8);
    EXPECT_EQ(cut.size(), kMaxPhaseName - 1);
    EXPECT_EQ(static_cast<unsigned char>(cut.back()), 0xa9);
}

// report/outliers.h: the median, the median absolute deviation and the threshold with its floor.
#include "report/outliers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace memguard::report {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

TEST(Outliers, MedianOfOddAndEvenCounts) {
    std::vector<uint64_t> odd{5, 1, 9};
    EXPECT_EQ(median_of(odd), 5u);
    std::vector<uint64_t> even{1, 10, 3, 8};
    EXPECT_EQ(median_of(even), 5u);  // (3 + 8) / 2, rounded down
    std::vector<uint64_t> huge{UINT64_MAX, UINT64_MAX - 2};
    EXPECT_EQ(median_of(huge), UINT64_MAX - 1);  // no overflow
    std::vector<uint64_t> none;
    EXPECT_THROW(median_of(none), std::invalid_argument);
}

TEST(Outliers, IdenticalRanksNeverFlag) {
    const FigureStats s = figure_stats(std::vector<uint64_t>(8, 10 * GiB));
    EXPECT_EQ(s.median, 10 * GiB);
    EXPECT_EQ(s.mad, 0u);
    EXPECT_EQ(s.threshold, 2 * GiB);  // 20% of the median: MAD 0 gives no threshold of its own
    EXPECT_FALSE(is_outlier(10 * GiB, s));
}

TEST(Outliers, TheFloorKeepsSmallDifferencesQuiet) {
    // Ranks 1 MiB apart: MAD 1 MiB, but a rank 200 MiB off is under the 256 MiB floor.
    const FigureStats s = figure_stats({100 * MiB, 101 * MiB, 99 * MiB, 100 * MiB, 300 * MiB});
    EXPECT_EQ(s.median, 100 * MiB);
    EXPECT_EQ(s.threshold, 256 * MiB);
    EXPECT_FALSE(is_outlier(300 * MiB, s));
    EXPECT_TRUE(is_outlier(357 * MiB, s));
}

TEST(Outliers, SpreadRaisesTheThreshold) {
    // A median of 10 GiB, deviations 0, 1, 1, 2, 2 GiB: MAD 1 GiB, threshold 5 x 1.4826 GiB.
    const FigureStats s = figure_stats({10 * GiB, 9 * GiB, 11 * GiB, 8 * GiB, 12 * GiB});
    EXPECT_EQ(s.mad, 1 * GiB);
    EXPECT_NEAR(static_cast<double>(s.threshold), 5 * 1.4826 * GiB, 1.0);
    EXPECT_FALSE(is_outlier(17 * GiB, s));
    EXPECT_TRUE(is_outlier(18 * GiB, s));
    EXPECT_TRUE(is_outlier(2 * GiB, s));         // below, both ways
    EXPECT_FALSE(is_outlier(2 * GiB, s, true));  // high_only: only above the median
}

TEST(Outliers, ARuleOfItsOwn) {
    OutlierRule rule;
    rule.k = 3;
    rule.min_bytes = 0;
    rule.min_share = 0;
    const FigureStats s = figure_stats({0, 0, 0, 1}, rule);
    EXPECT_EQ(s.threshold, 0u);
    EXPECT_TRUE(is_outlier(1, s, true));
    EXPECT_EQ(figure_stats({0, UINT64_MAX / 2, UINT64_MAX}, OutlierRule{1e300, 0, 0}).threshold, UINT64_MAX);
}

}  // namespace
}  // namespace memguard::report

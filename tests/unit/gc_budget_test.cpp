// The time budget of memguard's collections (python/gc_budget.h), driven by a fake clock: each
// opportunity is what a trigger does (allow, then the collection's cost and CUDA bytes freed).
#include <gtest/gtest.h>

#include <vector>

#include "python/gc_budget.h"

namespace memguard::python {
namespace {

using Kind = GcBudget::Kind;
constexpr int64_t kMs = 1000000;

/// A trigger firing every `period` ms with collections of `cost` ms freeing `freed` bytes, `n`
/// times from `clock`; returns how many of them collected. `clock` advances by the period.
int fire(GcBudget& b, Kind k, int64_t& clock, int n, int64_t period, int64_t cost, int64_t freed) {
    int ran = 0;
    for (int i = 0; i < n; ++i) {
        clock += period * kMs;
        if (!b.allow(k, clock)) continue;
        ++ran;
        clock += cost * kMs;
        b.charge(k, cost * kMs, freed, clock);
    }
    return ran;
}

TEST(GcBudget, CheapCollectionsThatFreeNothingKeepRunning) {
    GcBudget b(0.01);
    int64_t clock = 0;
    // 0.5 ms every 100 ms is 0.5% of the time: within a 1% budget, nothing backs off.
    EXPECT_EQ(fire(b, Kind::Recompute, clock, 50, 100, 0, 0), 50);
    EXPECT_EQ(fire(b, Kind::Step, clock, 50, 200, 1, 0), 50);
    EXPECT_EQ(b.totals(Kind::Step).skipped, 0u);
    EXPECT_FALSE(b.over_budget(clock));
}

TEST(GcBudget, BacksOffExponentiallyWhileOverBudgetAndFreeingNothing) {
    GcBudget b(0.01);
    int64_t clock = 0;
    // 10 ms collections every 10 ms: always over 1%. The skips double: 1, 2, 4, 8, ...
    std::vector<uint32_t> backoffs;
    for (int i = 0; i < 6; ++i) {
        clock += 10 * kMs;
        while (!b.allow(Kind::Recompute, clock)) clock += 10 * kMs;
        clock += 10 * kMs;
        b.charge(Kind::Recompute, 10 * kMs, 0, clock);
        backoffs.push_back(b.totals(Kind::Recompute).backoff);
    }
    EXPECT_EQ(backoffs, (std::vector<uint32_t>{1, 2, 4, 8, 16, 32}));
    EXPECT_EQ(b.totals(Kind::Recompute).skipped, 1u + 2 + 4 + 8 + 16);
    EXPECT_EQ(b.totals(Kind::Recompute).collections, 6u);
}

TEST(GcBudget, TheBackOffIsCapped) {
    GcBudget b(0.0001);
    int64_t clock = 0;
    fire(b, Kind::Step, clock, 20000, 1, 1, 0);
    EXPECT_EQ(b.totals(Kind::Step).backoff, GcBudget::kMaxSkip);
}

TEST(GcBudget, ACollectionThatFreesRestoresItsTrigger) {
    GcBudget b(0.01);
    int64_t clock = 0;
    fire(b, Kind::Recompute, clock, 100, 10, 10, 0);  // backs off
    ASSERT_GT(b.totals(Kind::Recompute).backoff, 1u);
    // The next collection that runs frees 1 GiB: restored, the next opportunities all collect
    // (while they keep freeing, however far over the budget).
    clock += 10 * kMs;
    while (!b.allow(Kind::Recompute, clock)) clock += 10 * kMs;
    b.charge(Kind::Recompute, 10 * kMs, 1 << 30, clock);
    EXPECT_EQ(b.totals(Kind::Recompute).backoff, 0u);
    EXPECT_EQ(fire(b, Kind::Recompute, clock, 20, 10, 10, 4096), 20);
    EXPECT_EQ(b.totals(Kind::Recompute).cuda_freed, (int64_t{1} << 30) + 20 * 4096);
}

TEST(GcBudget, TriggersBackOffEachOnTheirOwn) {
    GcBudget b(0.01);
    int64_t clock = 0;
    // The recompute trigger frees every time; the step trigger frees nothing: both are over the
    // shared budget, only the step trigger skips.
    for (int i = 0; i < 50; ++i) {
        fire(b, Kind::Recompute, clock, 4, 10, 5, 1 << 20);
        fire(b, Kind::Step, clock, 1, 10, 5, 0);
    }
    EXPECT_EQ(b.totals(Kind::Recompute).skipped, 0u);
    EXPECT_EQ(b.totals(Kind::Recompute).collections, 200u);
    EXPECT_GT(b.totals(Kind::Step).skipped, 0u);
    EXPECT_LT(b.totals(Kind::Step).collections, 50u);
}

TEST(GcBudget, UnknownFreedBytesCountAsNothing) {
    GcBudget b(0.01);
    int64_t clock = 0;
    fire(b, Kind::Compile, clock, 3, 1, 50, -1);  // no CUDA in use: -1
    EXPECT_GT(b.totals(Kind::Compile).backoff, 0u);
}

TEST(GcBudget, ABudgetOfOneNeverBacksOff) {
    GcBudget b(1.0);
    int64_t clock = 0;
    EXPECT_EQ(fire(b, Kind::Step, clock, 100, 0, 7, 0), 100);
    EXPECT_DOUBLE_EQ(b.used(clock), 1.0);
}

}  // namespace
}  // namespace memguard::python

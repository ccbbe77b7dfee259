// What became of a growth of live bytes at step ends (report/steps.h: growth_fate, step_collections)
// on hand-built reports: in allocator mode from the tensor blocks' t records (freed in a collection,
// released by the program, still held; live through a full collection or not), in interposition
// mode estimated from the collections' CUDA bytes freed.
#include <gtest/gtest.h>

#include <cstdio>

#include "report/steps.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::parse;

constexpr uint64_t MiB = 1 << 20;

std::string num(uint64_t v) { return std::to_string(v); }
/// Addresses are hex in a report.
std::string hex(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
}

/// A tensor block (T) of `size` MiB at `addr` allocated at `stack`, on thread 1.
std::string tensor(int64_t t, uint64_t addr, uint64_t size_mib, uint32_t stack) {
    const std::string size = num(size_mib * MiB);
    return "T " + num(t) + " 1 " + hex(addr) + " " + size + " " + size + " 0 0 " + num(stack) + " 0 0 -\n";
}
/// Its t record: freed by the program (gc 0) or while a collection ran on thread `tid` (gc 1).
std::string tensor_free(int64_t t, uint64_t addr, int gc, uint64_t tid = 1) {
    return "t " + num(t) + " " + num(tid) + " " + hex(addr) + " " + num(gc) + "\n";
}
std::string segment(int64_t t, uint64_t addr, uint64_t size_mib, uint32_t stack) {
    return "A " + num(t) + " 1 " + hex(addr) + " " + num(size_mib * MiB) + " device cudaMalloc 0 - " + num(stack) +
           " 0 0\n";
}
/// A Y record of format minor 9 on thread `tid`, freeing `freed` bytes of CUDA memory.
std::string collection(int64_t t, const char* trigger, int generation, int64_t freed, uint64_t tid = 1) {
    const std::string memguards = std::string(trigger) == "step" || std::string(trigger) == "recompute" ? "0" : "-";
    return "Y " + num(t) + " " + num(tid) + " " + trigger + " " + std::to_string(generation) + " 1000 10 0 " +
           std::to_string(freed) + " - - " + memguards + " -\n";
}
std::string segment_free(int64_t t, uint64_t addr, uint64_t size_mib, uint64_t tid = 1) {
    return "F " + num(t) + " " + num(tid) + " " + hex(addr) + " " + num(size_mib * MiB) + " cudaFree -\n";
}
std::string step(int64_t t, uint32_t n) { return "s " + num(t) + " 1 " + num(n) + " api -\n"; }

struct Found {
    std::vector<StepRow> rows;
    std::optional<Growth> growth;
};

Found find(const Report& r, Series series) {
    Found f;
    Timeline tl = build_timeline(r);
    f.rows = step_rows(r, tl, series);
    std::vector<uint64_t> ends;
    for (const StepRow& row : f.rows) ends.push_back(row.exit_bytes);
    f.growth = find_growth(ends);
    return f;
}

const std::string kAllocator = "I format_minor 9\nI allocator memguard\nS 1 10\nS 2 20\nS 3 30\n";

// Steps end at 100, 200, ... From step 2 a cycle keeps 64 MiB a step (stack 1) and a leak 16 MiB
// (stack 2), which also replaces a 32 MiB buffer every step; in steps 4 to 6 a cache keeps 8 MiB a
// step (stack 3). The step collection after step 6 frees the cycles; the program clears the cache
// and replaces the buffer in step 7.
std::string mixed_allocator_report() {
    std::string s = kAllocator;
    for (int k = 1; k <= 7; ++k) {
        const int64_t t = (k - 1) * 100;
        if (k >= 2) s += tensor_free(t + 5, 0x9000 + k - 1, 0);  // the buffer before
        s += tensor(t + 10, 0x9000 + k, 32, 2);
        if (k >= 2 && k <= 6) s += tensor(t + 20, 0x1000 + k, 64, 1);
        if (k >= 2 && k <= 6) s += tensor(t + 30, 0x2000 + k, 16, 2);
        if (k >= 4 && k <= 6) s += tensor(t + 40, 0x3000 + k, 8, 3);
        if (k == 4) s += collection(t + 50, "automatic", 0, 0);
        if (k == 7) {
            for (int i = 2; i <= 6; ++i) s += tensor_free(t + 60 + i, 0x1000 + i, 1);
            s += collection(t + 70, "step", 2, static_cast<int64_t>(320 * MiB));
            for (int i = 4; i <= 6; ++i) s += tensor_free(t + 80 + i, 0x3000 + i, 0);
        }
        s += step(k * 100, static_cast<uint32_t>(k));
    }
    return s;
}

TEST(StepsCycles, AllocatorModeSplitsTheGrowthByWhatBecameOfEachBlock) {
    Report r = parse(mixed_allocator_report());
    Found f = find(r, Series::Tensors);
    ASSERT_TRUE(f.growth);
    EXPECT_EQ(f.growth->first, 2u);  // steps 3 to 6
    EXPECT_EQ(f.growth->last, 5u);
    GrowthFate fate = growth_fate(r, f.rows, *f.growth, Series::Tensors, 5);
    EXPECT_TRUE(fate.exact);
    // Cycles 3 x 64, the leak 3 x 16 (not the buffer it also replaced), the cache 3 x 8.
    EXPECT_EQ(fate.growth_bytes, 264 * MiB);
    EXPECT_EQ(fate.collected_bytes, 192 * MiB);
    EXPECT_EQ(fate.released_bytes, 24 * MiB);
    EXPECT_EQ(fate.held_bytes, 48 * MiB);
    ASSERT_EQ(fate.collections.size(), 1u);
    EXPECT_EQ(fate.collections[0].collection,
              std::optional<size_t>(1));  // the step collection, after the automatic one
    EXPECT_EQ(fate.collections[0].bytes, 192 * MiB);
    ASSERT_EQ(fate.collected_sites.size(), 1u);
    EXPECT_EQ(fate.collected_sites[0].stack_id, 1u);
    ASSERT_EQ(fate.held_sites.size(), 1u);
    EXPECT_EQ(fate.held_sites[0].stack_id, 2u);
    EXPECT_EQ(fate.held_sites[0].bytes, 48 * MiB);
    // The leak was live through the step collection (generation 2): referenced.
    EXPECT_EQ(fate.held_tested_bytes, 48 * MiB);
    EXPECT_EQ(fate.full_through, std::optional<size_t>(1));
}

TEST(StepsCycles, StepCollectionsCountEachCollectionInTheStepItEndsIn) {
    Report r = parse(mixed_allocator_report() + collection(750, "explicit", 2, 5 * MiB));
    Found f = find(r, Series::Tensors);
    std::vector<StepCollections> per_step = step_collections(r, f.rows);
    ASSERT_EQ(per_step.size(), 7u);
    EXPECT_EQ(per_step[3].count, 1u);  // the automatic one at 350 freed nothing
    EXPECT_EQ(per_step[3].freed_bytes, 0u);
    // The step collection after step 6's end counts in step 7; the one after the last step in none.
    EXPECT_EQ(per_step[5].count, 0u);
    EXPECT_EQ(per_step[6].count, 1u);
    EXPECT_EQ(per_step[6].freed_bytes, 320 * MiB);
    uint64_t counted = 0;
    for (const StepCollections& c : per_step) counted += c.count;
    EXPECT_EQ(counted, 2u);
}

TEST(StepsCycles, StepCollectionsAtAStepsEndAndFreedBytesBelowZero) {
    Report r = parse("I format_minor 9\n" + collection(0, "automatic", 0, 7) + step(100, 1) +
                     collection(100, "explicit", 2, -50) + collection(150, "explicit", 2, 9) + step(200, 2));
    std::vector<StepRow> rows = step_rows(r, build_timeline(r), Series::Gpu);
    std::vector<StepCollections> per_step = step_collections(r, rows);
    ASSERT_EQ(per_step.size(), 2u);
    EXPECT_EQ(per_step[0].count, 2u);        // at 0 (the first step includes its start) and at its end
    EXPECT_EQ(per_step[0].freed_bytes, 7u);  // a negative drop counts as nothing
    EXPECT_EQ(per_step[1].count, 1u);
    EXPECT_EQ(per_step[1].freed_bytes, 9u);
}

TEST(StepsCycles, StepCollectionsWithAStepRecordedOutOfOrder) {
    // Step 3 ends before step 2 (the reader warns): the collections are still placed by a scan.
    Report r = parse("I format_minor 9\n" + step(100, 1) + step(300, 2) + step(200, 3) +
                     collection(250, "explicit", 2, 4) + collection(350, "explicit", 2, 6));
    std::vector<StepRow> rows = step_rows(r, build_timeline(r), Series::Gpu);
    std::vector<StepCollections> per_step = step_collections(r, rows);
    ASSERT_EQ(per_step.size(), 3u);
    EXPECT_EQ(per_step[0].count, 0u);
    EXPECT_EQ(per_step[1].count, 1u);  // (100, 300]
    EXPECT_EQ(per_step[1].freed_bytes, 4u);
    EXPECT_EQ(per_step[2].count, 0u);  // after the last step's end: in none
}

TEST(StepsCycles, AFreeInACollectionWithoutItsYAndHeldMemoryNoFullCollectionSaw) {
    // From step 2: 64 MiB a step in a cycle (stack 1), 16 MiB leaked (stack 2). In step 7 the cycles are
    // freed in a collection on thread 1 whose Y never came (the process was killed); thread 2's
    // generation-0 collection frees nothing of it.
    std::string s = kAllocator;
    for (int k = 1; k <= 7; ++k) {
        const int64_t t = (k - 1) * 100;
        if (k >= 2 && k <= 6) s += tensor(t + 20, 0x1000 + k, 64, 1);
        if (k >= 2) s += tensor(t + 30, 0x2000 + k, 16, 2);
        if (k == 7) {
            for (int i = 2; i <= 6; ++i) s += tensor_free(t + 60 + i, 0x1000 + i, 1);
            s += collection(t + 70, "automatic", 0, 0, 2);
        }
        s += step(k * 100, static_cast<uint32_t>(k));
    }
    Report r = parse(s);
    Found f = find(r, Series::Tensors);
    ASSERT_TRUE(f.growth);
    GrowthFate fate = growth_fate(r, f.rows, *f.growth, Series::Tensors, 5);
    EXPECT_EQ(fate.growth_bytes, 3 * 80 * MiB);
    EXPECT_EQ(fate.collected_bytes, 192 * MiB);
    ASSERT_EQ(fate.collections.size(), 1u);
    EXPECT_FALSE(fate.collections[0].collection);
    // Still held: the leak of steps 4 to 6, and no full collection ran while it was live.
    EXPECT_EQ(fate.held_bytes, 48 * MiB);
    EXPECT_EQ(fate.held_tested_bytes, 0u);
    EXPECT_FALSE(fate.full_through);
}

// Interposition mode: PyTorch's segments. From step 4 to 6 a 64 MiB segment a step for tensors in
// cycles (stack 1), from step 2 a 32 MiB one for a leak (stack 2). Every step a generation-0
// collection frees 8 MiB of tensors; in step 7 a full collection frees the cycles' 192 MiB.
std::string interposition_report(int64_t full_freed) {
    std::string s = "I format_minor 9\n";
    for (int k = 1; k <= 8; ++k) {
        const int64_t t = (k - 1) * 100;
        if (k >= 4 && k <= 6) s += segment(t + 20, 0x100000 + k, 64, 1);
        if (k >= 2) s += segment(t + 30, 0x200000 + k, 32, 2);
        s += collection(t + 60, "automatic", 0, static_cast<int64_t>(8 * MiB));
        if (k == 7) s += collection(t + 70, "automatic", 2, full_freed);
        s += step(k * 100, static_cast<uint32_t>(k));
    }
    return s;
}

TEST(StepsCycles, InterpositionModeEstimatesFromWhatCollectionsFreedBeyondTheMedianStep) {
    Report r = parse(interposition_report(static_cast<int64_t>(192 * MiB)));
    Found f = find(r, Series::Gpu);
    ASSERT_TRUE(f.growth);
    EXPECT_EQ(f.growth->first, 2u);  // steps 3 to 8: the cached memory is reused, the leak goes on
    EXPECT_EQ(f.growth->last, 7u);
    GrowthFate fate = growth_fate(r, f.rows, *f.growth, Series::Gpu, 5);
    EXPECT_FALSE(fate.exact);
    EXPECT_EQ(fate.growth_bytes, 352 * MiB);
    EXPECT_EQ(fate.baseline_bytes, 8 * MiB);
    EXPECT_EQ(fate.window_first, 3u);
    EXPECT_EQ(fate.window_last, 7u);
    EXPECT_TRUE(fate.window_tail);
    EXPECT_EQ(fate.window_bytes, 232 * MiB);
    EXPECT_EQ(fate.collected_bytes, 192 * MiB);
    EXPECT_EQ(fate.held_bytes, 160 * MiB);
    // Step 7's collections, the only step that freed more than the median.
    ASSERT_EQ(fate.collections.size(), 2u);
    EXPECT_EQ(fate.collections[0].bytes, 8 * MiB);
    EXPECT_EQ(fate.collections[1].bytes, 192 * MiB);
    // The leak's segments of steps 4 to 7 came before the full collection; those of step 8 after it.
    EXPECT_EQ(fate.held_tested_bytes, 128 * MiB);
    EXPECT_EQ(fate.full_through, std::optional<size_t>(7));
    EXPECT_TRUE(fate.collected_sites.empty());
}

TEST(StepsCycles, InterpositionModeCreditsAtMostTheGrowthAndNothingForASteadyStep) {
    Report big = parse(interposition_report(static_cast<int64_t>(4096 * MiB)));
    Found f = find(big, Series::Gpu);
    ASSERT_TRUE(f.growth);
    GrowthFate fate = growth_fate(big, f.rows, *f.growth, Series::Gpu, 5);
    EXPECT_EQ(fate.collected_bytes, fate.growth_bytes);
    EXPECT_EQ(fate.held_bytes, 0u);

    // The full collection frees no more than an ordinary step: nothing is credited.
    Report steady = parse(interposition_report(0));
    f = find(steady, Series::Gpu);
    ASSERT_TRUE(f.growth);
    fate = growth_fate(steady, f.rows, *f.growth, Series::Gpu, 5);
    EXPECT_EQ(fate.collected_bytes, 0u);
    EXPECT_TRUE(fate.collections.empty());
    EXPECT_EQ(fate.held_bytes, fate.growth_bytes);
}

TEST(StepsCycles, InterpositionModeKnowsTheSegmentsFreedWhileACollectionRan) {
    // Memory outside PyTorch's cache (cudaMalloc'd by objects whose finalizer frees it): from step 2 a
    // 64 MiB block a step in a cycle (stack 1) and a 16 MiB leak (stack 2). The collection after step 6
    // (1000 ns long, thread 1) frees the cycles' blocks; thread 2 frees the leak's of step 4 during it.
    std::string s = "I format_minor 9\n";
    for (int k = 1; k <= 8; ++k) {
        const int64_t t = (k - 1) * 100;
        if (k >= 2 && k <= 6) s += segment(t + 20, 0x100000 + k, 64, 1);
        if (k >= 2) s += segment(t + 30, 0x200000 + k, 16, 2);
        if (k == 7) {
            for (int i = 2; i <= 6; ++i) s += segment_free(t + 10, 0x100000 + i, 64);
            s += segment_free(t + 10, 0x200000 + 4, 16, 2);
            s += collection(t + 10, "step", 2, static_cast<int64_t>(320 * MiB));
        }
        s += step(k * 100, static_cast<uint32_t>(k));
    }
    Report r = parse(s);
    Found f = find(r, Series::Gpu);
    ASSERT_TRUE(f.growth);
    EXPECT_EQ(f.growth->first, 2u);  // steps 3 to 6
    EXPECT_EQ(f.growth->last, 5u);
    GrowthFate fate = growth_fate(r, f.rows, *f.growth, Series::Gpu, 5);
    EXPECT_EQ(fate.growth_bytes, 240 * MiB);
    // The cycles of steps 4 to 6, not those of steps 2 and 3 that the same collection freed (its
    // 320 MiB are not estimated), nor the leak's block thread 2 freed meanwhile.
    EXPECT_EQ(fate.known_bytes, 192 * MiB);
    EXPECT_EQ(fate.collected_bytes, 192 * MiB);
    EXPECT_EQ(fate.held_bytes, 48 * MiB);
    ASSERT_EQ(fate.collections.size(), 1u);
    EXPECT_EQ(fate.collections[0].bytes, 192 * MiB);
    ASSERT_EQ(fate.collected_sites.size(), 1u);
    EXPECT_EQ(fate.collected_sites[0].stack_id, 1u);
    // The leak's blocks of steps 5 and 6 were live through the step collection (and to the end).
    EXPECT_EQ(fate.held_tested_bytes, 32 * MiB);
}

TEST(StepsCycles, InterpositionModeKnowsTheStoragesAnExplainedCollectionFoundInGrowthSegments) {
    // PyTorch's segments: from step 2 a 64 MiB one a step for a tensor in a cycle (stack 1), a 16 MiB
    // one for a leak (stack 2). The step collection after step 6 is explained: its storages are the
    // tensors of steps 2 to 6 (those of steps 2 and 3 in segments older than the growth), and a
    // second 48 MiB view into step 6's segment, which holds 64 MiB in all.
    std::string s = "I format_minor 9\n";
    for (int k = 1; k <= 8; ++k) {
        const int64_t t = (k - 1) * 100;
        if (k >= 2 && k <= 6) s += segment(t + 20, 0x10000000 + k * 0x4000000, 64, 1);
        if (k >= 2) s += segment(t + 30, 0x80000000 + k * 0x1000000, 16, 2);
        if (k == 7) {
            s += "j " + num(t + 5) + " 1 1 100 6 " + num(368 * MiB) + " 1000 1\n";
            for (int i = 2; i <= 6; ++i)
                s += "y 1 0 " + hex(0x10000000 + i * 0x4000000) + " " + num(64 * MiB) + " tensor activation -\n";
            s += "y 1 0 " + hex(0x10000000 + 6 * 0x4000000 + 16 * MiB) + " " + num(48 * MiB) + " tensor activation -\n";
            s += "Y " + num(t + 10) + " 1 step 2 1000 100 0 " + num(368 * MiB) + " - - 0 1\n";
        }
        s += step(k * 100, static_cast<uint32_t>(k));
    }
    Report r = parse(s);
    ASSERT_EQ(r.explanations.size(), 1u);
    Found f = find(r, Series::Gpu);
    ASSERT_TRUE(f.growth);
    GrowthFate fate = growth_fate(r, f.rows, *f.growth, Series::Gpu, 5);
    // Steps 4 to 6's segments, each counted once: the explained collection is not estimated.
    EXPECT_EQ(fate.known_bytes, 192 * MiB);
    EXPECT_EQ(fate.collected_bytes, 192 * MiB);
    ASSERT_EQ(fate.collections.size(), 1u);
    EXPECT_EQ(fate.collections[0].bytes, 192 * MiB);
    ASSERT_EQ(fate.collected_sites.size(), 1u);
    EXPECT_EQ(fate.collected_sites[0].stack_id, 1u);
    // The cycles' segments stay (PyTorch's cache): of the memory live through the collection, only
    // the leak's is held.
    EXPECT_EQ(fate.held_tested_bytes, 48 * MiB);
}

}  // namespace
}  // namespace memguard::report

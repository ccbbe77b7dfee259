// The analysis behind `memguard steps` and `memguard oom` (report/steps.h, report/oom.h) on
// hand-built inputs: step rows, the growth rule, grown sites and categories, how OOMs and
// recovered CUDA failures are found, fragmentation and the verdict's rules. The categories
// themselves (breakdown_at) are given as hand-built Breakdown values, so these tests hold whatever
// rules categories.cpp uses.
#include <gtest/gtest.h>

#include "report/oom.h"
#include "report/steps.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::parse;

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;

// --- step rows ---------------------------------------------------------------------------------

std::string alloc(int64_t t, const char* addr, uint64_t size, uint64_t tid = 1, uint32_t stack = 0) {
    return "A " + std::to_string(t) + " " + std::to_string(tid) + " " + addr + " " + std::to_string(size) +
           " device cudaMalloc 0 - " + std::to_string(stack) + " 0 0\n";
}
std::string free_(int64_t t, const char* addr, uint64_t size) {
    return "F " + std::to_string(t) + " 1 " + addr + " " + std::to_string(size) + " cudaFree -\n";
}
std::string step(int64_t t, uint32_t n) { return "s " + std::to_string(t) + " 1 " + std::to_string(n) + " api -\n"; }

TEST(Steps, RowsMeasurePeakIncrementalPeakAndLiveAtEnd) {
    Report r = parse("I format_minor 8\n" + alloc(10, "1000", 100) + step(20, 1) + alloc(30, "2000", 50) +
                     alloc(40, "3000", 30) + free_(50, "2000", 50) + step(60, 2) + step(70, 3));
    Timeline tl = build_timeline(r);
    std::vector<StepRow> rows = step_rows(r, tl, Series::Gpu);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].entry_bytes, 0u);
    EXPECT_EQ(rows[0].peak_bytes, 100u);
    EXPECT_EQ(rows[0].exit_bytes, 100u);
    EXPECT_EQ(rows[0].t_begin, 0);
    EXPECT_EQ(rows[1].entry_bytes, 100u);
    EXPECT_EQ(rows[1].peak_bytes, 180u);
    EXPECT_EQ(rows[1].incremental_peak(), 80u);
    EXPECT_EQ(rows[1].peak_t, 40);
    EXPECT_EQ(rows[1].exit_bytes, 130u);
    EXPECT_EQ(rows[1].t_begin, 20);
    EXPECT_EQ(rows[1].t_end, 60);
    // A step with no event: its peak is what was live through it.
    EXPECT_EQ(rows[2].peak_bytes, 130u);
    EXPECT_EQ(rows[2].incremental_peak(), 0u);
}

// --- the growth rule ---------------------------------------------------------------------------

TEST(Steps, GrowthOverConsecutiveStepsAfterWarmup) {
    // Steps 1-2 are warm-up (optimizer state appears); from then on 64 MiB a step.
    std::vector<uint64_t> ends =
        {1 * GiB, 2 * GiB, 2 * GiB + 64 * MiB, 2 * GiB + 128 * MiB, 2 * GiB + 192 * MiB, 2 * GiB + 256 * MiB};
    std::optional<Growth> g = find_growth(ends);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->first, 2u);
    EXPECT_EQ(g->last, 5u);
    EXPECT_DOUBLE_EQ(g->per_step, 64.0 * MiB);
    EXPECT_EQ(g->from_bytes, 2 * GiB + 64 * MiB);
    EXPECT_EQ(g->to_bytes, 2 * GiB + 256 * MiB);
}

TEST(Steps, NoGrowthWhenFlatOrOnlyDuringWarmup) {
    EXPECT_FALSE(find_growth({GiB, GiB, GiB, GiB, GiB, GiB}));
    EXPECT_FALSE(find_growth({GiB, 2 * GiB, 3 * GiB, 3 * GiB, 3 * GiB, 3 * GiB}));
}

TEST(Steps, NoGrowthBelowTheThresholdOrOverTooFewSteps) {
    EXPECT_FALSE(find_growth({GiB, GiB + 1000, GiB + 2000, GiB + 3000, GiB + 4000}));  // 1000 B a step
    EXPECT_FALSE(find_growth({GiB, 2 * GiB}));                                         // two steps
    // Three steps: no warm-up left out; they grow.
    std::optional<Growth> g = find_growth({GiB, 2 * GiB, 3 * GiB});
    ASSERT_TRUE(g);
    EXPECT_EQ(g->first, 0u);
    EXPECT_EQ(g->last, 2u);
}

TEST(Steps, SmallDropsDoNotBreakARunLargeOnesDo) {
    // A 0.5% dip (allocator noise) keeps the run; the slope still counts it.
    std::vector<uint64_t> noisy = {GiB, GiB, GiB, GiB + 100 * MiB, GiB + 95 * MiB, GiB + 300 * MiB, GiB + 400 * MiB};
    std::optional<Growth> g = find_growth(noisy);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->first, 2u);
    EXPECT_EQ(g->last, 6u);
    // A drop of half splits it into runs of two: none is long enough.
    EXPECT_FALSE(find_growth({GiB, GiB, GiB, 2 * GiB, GiB, 2 * GiB, GiB, 2 * GiB}));
}

TEST(Steps, TheLongestRunIsReportedTrimmedToTheStepsThatGrew) {
    // Grows over steps 3-6, then flat: reported over 3-6, not to the end.
    std::vector<uint64_t> ends = {GiB, GiB, GiB, 2 * GiB, 3 * GiB, 4 * GiB, 4 * GiB, 4 * GiB};
    std::optional<Growth> g = find_growth(ends);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->first, 2u);
    EXPECT_EQ(g->last, 5u);
    EXPECT_EQ(warmup_steps(8, GrowthRule{}), 2u);
    EXPECT_EQ(warmup_steps(4, GrowthRule{}), 1u);
    EXPECT_EQ(warmup_steps(3, GrowthRule{}), 0u);
}

TEST(Steps, SlopeIsTheLeastSquaresFit) {
    EXPECT_DOUBLE_EQ(slope({0, 10, 20, 30}, 0, 3), 10.0);
    EXPECT_DOUBLE_EQ(slope({0, 0, 30}, 0, 2), 15.0);
    EXPECT_DOUBLE_EQ(slope({5}, 0, 0), 0.0);
    // Near 2^64 the sums do not overflow.
    EXPECT_GT(slope({UINT64_MAX - 3 * GiB, UINT64_MAX - 2 * GiB, UINT64_MAX - GiB}, 0, 2), 0.99 * GiB);
}

TEST(Steps, GrownSitesAndCategories) {
    SiteTable a, b;
    a.sites = {Site{1, 1, false, 100, 1, 0}, Site{2, 0, false, 50, 1, 0}};
    b.sites = {Site{1, 1, false, 400, 4, 0}, Site{2, 0, false, 10, 1, 0}, Site{3, 0, false, 20, 1, 0}};
    std::vector<SiteChange> s = grown_sites(a, b, 5);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].stack_id, 1u);
    EXPECT_EQ(s[0].delta(), 300);
    EXPECT_EQ(s[1].stack_id, 3u);
    EXPECT_EQ(s[1].from, 0u);
    EXPECT_EQ(grown_sites(a, b, 1).size(), 1u);

    Breakdown from, to;
    from.parts = {CategoryPart{Category::Parameter, "", 100, 1, false, 0, {}},
                  CategoryPart{Category::OtherTensor, "", 10, 1, false, 0, {}}};
    to.parts = {CategoryPart{Category::Parameter, "", 100, 1, false, 0, {}},
                CategoryPart{Category::OtherTensor, "", 500, 9, false, 0, {}},
                CategoryPart{Category::Library, "libnccl.so.2", 20, 1, true, 20, {}}};
    std::vector<CategoryChange> c = grown_categories(from, to);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].category, Category::OtherTensor);
    EXPECT_EQ(c[0].to - c[0].from, 490u);
    EXPECT_EQ(c[1].detail, "libnccl.so.2");
}

// --- finding OOMs ------------------------------------------------------------------------------

std::string failure(int64_t t, uint64_t tid, uint64_t size) {
    return "E " + std::to_string(t) + " " + std::to_string(tid) + " " + std::to_string(size) +
           " device cudaMalloc 0 - 0 2 0 0\n";
}
std::string oom_x(int64_t t, uint64_t tid, const char* source, uint64_t size) {
    return "x " + std::to_string(t) + " " + std::to_string(tid) + " 0 " + source + " - " + std::to_string(size) +
           " - 100 1000 - - 0 0 0 0 0\n";
}

TEST(Oom, ACudaFailureFollowedByTheAllocationIsRecovered) {
    Report r = parse("I format_minor 8\n" + failure(100, 7, 64) + oom_x(101, 7, "cuda", 64) +
                     alloc(200, "1000", 64, 7));
    std::vector<OomEvent> e = find_ooms(r);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_TRUE(e[0].recovered);
    EXPECT_EQ(e[0].failure, std::optional<size_t>(0));
    EXPECT_EQ(e[0].context, std::optional<size_t>(0));
}

TEST(Oom, NotRecoveredByAnotherThreadsOrASmallerAllocationOrTooLate) {
    for (const std::string& after :
         {alloc(200, "1000", 64, 8), alloc(200, "1000", 32, 7), alloc(101 + kRetryWindowNs + 1, "1000", 64, 7)}) {
        Report r = parse("I format_minor 8\n" + failure(100, 7, 64) + oom_x(101, 7, "cuda", 64) + after);
        std::vector<OomEvent> e = find_ooms(r);
        ASSERT_EQ(e.size(), 1u) << after;
        EXPECT_FALSE(e[0].recovered) << after;
        EXPECT_EQ(e[0].source, OomSource::Cuda);
    }
}

TEST(Oom, ACudaFailureBeforeTorchsOomIsPartOfIt) {
    Report r = parse("I format_minor 8\n" + failure(100, 7, 64) + oom_x(101, 7, "cuda", 64) +
                     oom_x(300, 7, "torch", 64) + alloc(400, "1000", 64, 7));
    std::vector<OomEvent> e = find_ooms(r);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].source, OomSource::Torch);
    EXPECT_FALSE(e[0].recovered);
    EXPECT_EQ(e[0].cuda_failures, std::vector<size_t>{0});
}

TEST(Oom, OlderReportsEWithoutX) {
    // An E with error 2 and no x: an OOM of its own, at the state of its time; an E of another error
    // is not an OOM.
    Report r = parse("I format_minor 8\n" + alloc(50, "1000", 10) + failure(100, 7, 64) + alloc(150, "2000", 10) +
                     "E 120 7 64 device cudaMalloc 0 - 0 1 0 0\n");
    std::vector<OomEvent> e = find_ooms(r);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].source, OomSource::Cuda);
    EXPECT_FALSE(e[0].context);
    EXPECT_EQ(e[0].events_before, 1u);
    EXPECT_EQ(events_at_time(r, 149), 1u);
    EXPECT_EQ(events_at_time(r, 150), 2u);
}

// --- figures and verdict -----------------------------------------------------------------------

TEST(Oom, FragmentationIsTheFreeBytesInBlocksTooSmall) {
    std::vector<uint64_t> blocks = {2 * GiB, GiB, 5 * GiB};
    EXPECT_EQ(fragmentation_of(4 * GiB, 8 * GiB, 5 * GiB, &blocks), 3 * GiB);
    EXPECT_EQ(fragmentation_of(4 * GiB, 6 * GiB, 2 * GiB, nullptr), 6 * GiB);  // no block list: all of it
    EXPECT_EQ(fragmentation_of(4 * GiB, 6 * GiB, 5 * GiB, nullptr), 0u);
    EXPECT_EQ(fragmentation_of(4 * GiB, 6 * GiB, std::nullopt, nullptr), 0u);
}

Breakdown breakdown(std::vector<std::pair<Category, uint64_t>> parts) {
    Breakdown b;
    for (auto [c, bytes] : parts) {
        b.parts.push_back(CategoryPart{c, "", bytes, 1, false, 0, {}});
        b.total += bytes;
    }
    return b;
}

TEST(Oom, VerdictNamesTheLargestCategoryAndItsSite) {
    OomFigures f;
    f.request = GiB;
    std::vector<std::string> v =
        oom_verdict(f, breakdown({{Category::Activation, 87 * GiB}, {Category::Parameter, 13 * GiB}}),
                    "forward at train.py:41");
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0], "87% of this process's GPU memory (87.00 GiB of 100.00 GiB) is activations and tensors saved for "
                    "backward, allocated at forward at train.py:41.");
    // Under half: the second is named too.
    v = oom_verdict(f, breakdown({{Category::OptimizerState, 40}, {Category::Parameter, 35}, {Category::Other, 25}}),
                    "");
    EXPECT_EQ(v[0], "40% of this process's GPU memory (40 B of 100 B) is optimizer state; 35% is parameters.");
}

TEST(Oom, VerdictPutsFragmentationAndOtherProcessesFirstThenTheLimit) {
    OomFigures f;
    f.request = 4 * GiB;
    f.cached_free = 6 * GiB;
    f.largest_free = 2 * GiB;
    f.fragmentation = 6 * GiB;
    f.device_total = 80 * GiB;
    f.device_free = GiB;
    f.others = 11 * GiB;
    std::vector<std::string> v = oom_verdict(f, breakdown({{Category::Activation, 60 * GiB}}), "");
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(v[0],
              "6.00 GiB is fragmentation: PyTorch's cache held 6.00 GiB free, more than the 4.00 GiB requested, but "
              "its largest free block was 2.00 GiB (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments "
              "grow instead).");
    EXPECT_EQ(v[1],
              "11.00 GiB of the device's 80.00 GiB is held by other processes (or outside memguard's view): 1.00 GiB "
              "was free for the 4.00 GiB requested.");
    EXPECT_EQ(v[2].rfind("100% of this process's GPU memory", 0), 0u);
    // The largest free block would have served it: no fragmentation sentence.
    f.largest_free = 4 * GiB;
    v = oom_verdict(f, breakdown({{Category::Activation, 60 * GiB}}), "");
    ASSERT_EQ(v.size(), 2u);
    EXPECT_NE(v[0].find("other processes"), std::string::npos);
    // A few hundred MiB of others (this process's CUDA context) are not blamed; a limit is named.
    f.others = 300 * MiB;
    f.device_free = 40 * GiB;
    f.limit = 40 * GiB;
    v = oom_verdict(f, breakdown({{Category::Activation, 60 * GiB}}), "");
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[1], "A memory-fraction limit of 40.00 GiB (of 80.00 GiB) applies: this process may not reserve more.");
    // No limit, nobody else, and the device had less free than asked: said so.
    f.limit.reset();
    f.device_free = 2 * GiB;
    v = oom_verdict(f, breakdown({{Category::Activation, 60 * GiB}}), "");
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0], "The device had 2.00 GiB free, less than the 4.00 GiB requested.");
}

TEST(Oom, VerdictNamesWhatKeepsTheSavedTensors) {
    OomFigures f;
    f.request = GiB;
    f.saved = {{"saved by MmBackward0 (kept by total_loss at train.py:57)", 20 * GiB},
               {"saved by MulBackward0 (kept by losses at train.py:60)", 4 * GiB},
               {"saved by ReluBackward0 (kept by total_loss at train.py:57)", 6 * GiB}};
    std::vector<std::string> v = oom_verdict(f, breakdown({{Category::Activation, 30 * GiB}}), "");
    EXPECT_NE(v[0].find("; autograd graphs kept alive by total_loss at train.py:57 hold 26.00 GiB of them."),
              std::string::npos);
    // A label without a holder: the largest label.
    f.saved = {{"saved by MulBackward0", 30 * GiB}};
    v = oom_verdict(f, breakdown({{Category::Activation, 30 * GiB}}), "");
    EXPECT_NE(v[0].find("; the largest are saved by MulBackward0 (30.00 GiB)."), std::string::npos);
    // Without a breakdown: what this process held.
    f.this_process = 2 * GiB;
    v = oom_verdict(f, Breakdown{}, "");
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].rfind("This process held 2.00 GiB", 0), 0u);
}

}  // namespace
}  // namespace memguard::report

// Derived figures: summary, peak, live set at a time, grouping by site.
#include <gtest/gtest.h>

#include <numeric>

#include "report/analysis.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::parse;

constexpr uint64_t MiB = 1 << 20;

std::string alloc(int64_t t, uint64_t tid, const std::string& addr, uint64_t size, const std::string& kind,
                  int device = 0, uint32_t stack = 0) {
    return "A " + std::to_string(t) + " " + std::to_string(tid) + " " + addr + " " + std::to_string(size) + " " +
           kind + " cudaMalloc " + std::to_string(device) + " - " + std::to_string(stack) + "\n";
}

std::string free_(int64_t t, uint64_t tid, const std::string& addr) {
    return "F " + std::to_string(t) + " " + std::to_string(tid) + " " + addr + " 0 cudaFree -\n";
}

uint64_t live_bytes(const Report& r, const LiveSet& s, KindFilter f = KindFilter::Gpu) {
    uint64_t total = 0;
    for (size_t b : s.blocks) total += kind_matches(r.blocks[b].kind, f) ? r.blocks[b].size : 0;
    return total;
}

std::vector<uint64_t> addrs(const Report& r, const LiveSet& s) {
    std::vector<uint64_t> out;
    for (size_t b : s.blocks) out.push_back(r.blocks[b].addr);
    return out;
}

TEST(Summary, CountsAndPeakWithItsFirstTime) {
    Report r = parse(alloc(100, 1, "a0", 2 * MiB, "device") + alloc(200, 1, "b0", 1 * MiB, "device") +  // 3 MiB
                     free_(300, 1, "a0") +                                                                 // 1 MiB
                     alloc(400, 1, "c0", 2 * MiB, "device") +  // 3 MiB again: not a new peak
                     free_(500, 1, "c0") + "Z 1000\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.allocations, 3u);
    EXPECT_EQ(s.frees, 2u);
    EXPECT_EQ(s.peak_bytes, 3 * MiB);
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(200));
    EXPECT_EQ(s.peak_events, 2u);
    EXPECT_EQ(s.live_bytes_at_exit, 1 * MiB);
    EXPECT_EQ(s.live_blocks_at_exit, 1u);
    EXPECT_EQ(s.duration_ns, 1000);
    EXPECT_TRUE(s.complete);
}

TEST(Summary, PinnedIsExcludedFromGpuFiguresButCountedPerKind) {
    Report r = parse(alloc(100, 1, "a0", 1 * MiB, "device") + alloc(200, 1, "ff0", 8 * MiB, "pinned", -1) +
                     alloc(300, 1, "b0", 2 * MiB, "async") + alloc(400, 1, "c0", 4 * MiB, "managed") +
                     free_(500, 1, "b0") + "Z 1000\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.allocations, 4u);
    EXPECT_EQ(s.peak_bytes, 7 * MiB);  // device + async + managed, not pinned
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(400));
    EXPECT_EQ(s.live_bytes_at_exit, 5 * MiB);
    EXPECT_EQ(s.live_blocks_at_exit, 2u);
    const KindStats& pinned = s.by_kind[kind_index(Kind::Pinned)];
    EXPECT_EQ(pinned.allocations, 1u);
    EXPECT_EQ(pinned.peak_bytes, 8 * MiB);
    EXPECT_EQ(pinned.peak_t, std::optional<int64_t>(200));
    EXPECT_EQ(pinned.live_bytes_at_exit, 8 * MiB);
    EXPECT_EQ(s.by_kind[kind_index(Kind::Async)].frees, 1u);
    EXPECT_EQ(s.by_kind[kind_index(Kind::Async)].live_bytes_at_exit, 0u);
    EXPECT_EQ(s.by_kind[kind_index(Kind::Managed)].bytes_allocated, 4 * MiB);
    EXPECT_EQ(s.by_device.count(-1), 0u);  // pinned memory is on no device
    ASSERT_EQ(s.by_device.count(0), 1u);
    EXPECT_EQ(s.by_device.at(0).allocations, 3u);
}

TEST(Summary, PerDevicePeaksAreIndependent) {
    Report r = parse(alloc(100, 1, "a0", 4 * MiB, "device", 0) + free_(150, 1, "a0") +
                     alloc(200, 2, "b0", 3 * MiB, "device", 1) + alloc(300, 1, "c0", 1 * MiB, "device", 0) +
                     "Z 1000\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.peak_bytes, 4 * MiB);
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(100));
    EXPECT_EQ(s.by_device.at(0).peak_bytes, 4 * MiB);
    EXPECT_EQ(s.by_device.at(0).peak_t, std::optional<int64_t>(100));
    EXPECT_EQ(s.by_device.at(0).live_bytes_at_exit, 1 * MiB);
    EXPECT_EQ(s.by_device.at(1).peak_bytes, 3 * MiB);
    EXPECT_EQ(s.by_device.at(1).peak_t, std::optional<int64_t>(200));
}

TEST(Summary, FailuresAndOomEvents) {
    Report r = parse("E 10 1 16 device cudaMalloc 0 - 0 2 0\nE 11 1 16 async cudaMallocAsync 1 - 0 2 0\n"
                     "E 12 1 16 device cudaMalloc 1 - 0 1 0\nE 13 1 16 pinned cudaHostAlloc -1 - 0 2 0\nZ 20\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.failed_allocations, 4u);
    EXPECT_EQ(s.oom_events, 3u);
    EXPECT_EQ(s.by_device.at(0).failed_allocations, 1u);
    EXPECT_EQ(s.by_device.at(0).oom_events, 1u);
    EXPECT_EQ(s.by_device.at(1).failed_allocations, 2u);
    EXPECT_EQ(s.by_device.at(1).oom_events, 1u);
    EXPECT_EQ(s.by_device.count(-1), 0u);
    EXPECT_EQ(s.peak_bytes, 0u);
    EXPECT_FALSE(s.peak_t.has_value());
}

TEST(Summary, RestoreCountsAsAFailedFreeAndCanSetThePeak) {
    Report r = parse(alloc(100, 1, "a0", 5, "device") + free_(200, 1, "a0") + alloc(300, 2, "b0", 3, "device") +
                     "R 400 1 a0 700\n" + free_(500, 1, "b0") + "Z 600\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.failed_frees, 1u);
    EXPECT_EQ(s.frees, 1u);  // b0; the free of a0 did not happen
    EXPECT_EQ(s.peak_bytes, 8u);
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(400));
    EXPECT_EQ(s.live_bytes_at_exit, 5u);
}

TEST(Summary, NoGpuMemoryAtAll) {
    Report r = parse(alloc(100, 1, "ff0", 64, "pinned", -1) + "Z 200\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.peak_bytes, 0u);
    EXPECT_FALSE(s.peak_t.has_value());
    EXPECT_EQ(s.peak_events, 0u);
    EXPECT_TRUE(live_at(r, {TimePoint::Peak, 0}).blocks.empty());
    EXPECT_TRUE(s.by_device.empty());
}

TEST(Summary, IncompleteReport) {
    Report r = parse(alloc(100, 1, "a0", 64, "device") + "H 5000\n");
    Summary s = summarize(r);
    EXPECT_FALSE(s.complete);
    EXPECT_EQ(s.duration_ns, 5000);
    EXPECT_EQ(s.live_bytes_at_exit, 64u);
}

// --- live set ----------------------------------------------------------------------------------

TEST(LiveAt, PeakExitAndTimes) {
    Report r = parse(alloc(100, 1, "a0", 10, "device") + alloc(200, 1, "b0", 20, "device") + free_(300, 1, "a0") +
                     alloc(400, 1, "c0", 5, "device") + free_(500, 1, "b0") + "Z 900\n");
    LiveSet peak = live_at(r, {TimePoint::Peak, 0});
    EXPECT_EQ(addrs(r, peak), (std::vector<uint64_t>{0xa0, 0xb0}));
    EXPECT_EQ(peak.t, 200);
    LiveSet exit = live_at(r, {TimePoint::Exit, 0});
    EXPECT_EQ(addrs(r, exit), std::vector<uint64_t>{0xc0});
    EXPECT_EQ(exit.t, 900);
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 0})), std::vector<uint64_t>{});
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 99})), std::vector<uint64_t>{});
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 100})), std::vector<uint64_t>{0xa0});  // t <= T counts
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 299})), (std::vector<uint64_t>{0xa0, 0xb0}));
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 300})), std::vector<uint64_t>{0xb0});
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 450})), (std::vector<uint64_t>{0xb0, 0xc0}));
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 1000000})), std::vector<uint64_t>{0xc0});
    EXPECT_EQ(live_at(r, {TimePoint::Time, 450}).t, 450);
}

TEST(LiveAt, LiveAtExitIsTheBlocksNeverFreed) {
    Report r = parse(alloc(1, 1, "a0", 1, "device") + alloc(2, 1, "b0", 2, "pinned", -1) + free_(3, 1, "a0") +
                     alloc(4, 1, "a0", 3, "managed") + free_(5, 1, "b0") + "R 6 1 b0 1\n" + "Z 9\n");
    LiveSet exit = live_at(r, {TimePoint::Exit, 0});
    std::vector<size_t> expected;
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (!r.blocks[i].t_free) expected.push_back(i);
    }
    EXPECT_EQ(exit.blocks, expected);
    EXPECT_EQ(exit.blocks.size(), 2u);
}

TEST(LiveAt, PeakSetHoldsExactlyThePeakBytes) {
    Report r = parse(alloc(1, 1, "a0", 7, "device") + alloc(2, 2, "b0", 9, "async", 1) +
                     alloc(3, 1, "ff0", 100, "pinned", -1) + free_(4, 1, "a0") + alloc(5, 2, "c0", 8, "managed") +
                     free_(6, 2, "b0") + "Z 9\n");
    Summary s = summarize(r);
    LiveSet peak = live_at(r, {TimePoint::Peak, 0});
    EXPECT_EQ(live_bytes(r, peak), s.peak_bytes);
    EXPECT_EQ(s.peak_bytes, 17u);  // b0 + c0 after a0 was freed
    EXPECT_EQ(peak.t, 5);
}

// Records from different threads are in observation order; their times need not increase.
TEST(LiveAt, InterleavedThreadsUseFileOrder) {
    Report r = parse(alloc(100, 1, "a0", 10, "device") +  // thread 1
                     alloc(90, 2, "b0", 20, "device") +   // thread 2, observed later with an earlier time
                     free_(120, 1, "a0") + alloc(110, 2, "c0", 30, "device") + "Z 200\n");
    // The state at T stops at the first record later than T: at 95 that is the very first one.
    EXPECT_TRUE(live_at(r, {TimePoint::Time, 95}).blocks.empty());
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 100})), (std::vector<uint64_t>{0xa0, 0xb0}));
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 115})), (std::vector<uint64_t>{0xa0, 0xb0}));
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 120})), (std::vector<uint64_t>{0xb0, 0xc0}));
    Summary s = summarize(r);
    EXPECT_EQ(s.peak_bytes, 50u);  // b0 + c0 (a0 + b0 was only 30)
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(110));
}

TEST(LiveAt, AddressReusedByAnotherThread) {
    Report r = parse(alloc(100, 1, "a0", 10, "device", 0, 1) + free_(110, 1, "a0") +
                     alloc(111, 2, "a0", 40, "device", 0, 2) + alloc(112, 1, "b0", 1, "device", 0, 1) + "Z 200\n");
    ASSERT_EQ(r.blocks.size(), 3u);
    LiveSet exit = live_at(r, {TimePoint::Exit, 0});
    EXPECT_EQ(exit.blocks, (std::vector<size_t>{1, 2}));
    EXPECT_EQ(live_bytes(r, exit), 41u);
    EXPECT_EQ(r.blocks[1].stack_id, 2u);
    EXPECT_EQ(summarize(r).peak_bytes, 41u);
}

TEST(LiveAt, RestoreMakesTheBlockLiveAgainAtItsTime) {
    Report r = parse(alloc(100, 1, "a0", 10, "device") + free_(200, 1, "a0") + "R 210 1 a0 1\n" + "Z 300\n");
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 205})), std::vector<uint64_t>{});
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Time, 210})), std::vector<uint64_t>{0xa0});
    EXPECT_EQ(addrs(r, live_at(r, {TimePoint::Exit, 0})), std::vector<uint64_t>{0xa0});
}

// --- sites -------------------------------------------------------------------------------------

TEST(Sites, GroupedByStackAndSorted) {
    Report r = parse("M 0 0 ffff 0 - /a\nS 1 10\nS 2 20\nS 3 30\n" + alloc(1, 1, "a0", 100, "device", 0, 1) +
                     alloc(2, 1, "b0", 300, "device", 0, 2) + alloc(3, 1, "c0", 50, "device", 0, 1) +
                     alloc(4, 1, "d0", 50, "async", 1, 3) + alloc(5, 1, "e0", 100, "managed", 0, 3) +
                     alloc(6, 1, "f0", 999, "pinned", -1, 1) + alloc(7, 1, "aa0", 150, "device", 0, 0) + "Z 9\n");
    LiveSet exit = live_at(r, {TimePoint::Exit, 0});
    SiteTable t = group_by_site(r, exit, KindFilter::Gpu);
    EXPECT_EQ(t.total_bytes, 750u);
    EXPECT_EQ(t.total_blocks, 6u);
    ASSERT_EQ(t.sites.size(), 4u);
    EXPECT_EQ(t.sites[0].stack_id, 2u);
    EXPECT_EQ(t.sites[0].bytes, 300u);
    // Stacks 1 and 3 both hold 150 bytes in 2 blocks, and stack 0 150 bytes in 1 block.
    EXPECT_EQ(t.sites[1].stack_id, 1u);
    EXPECT_EQ(t.sites[1].blocks, 2u);
    EXPECT_EQ(t.sites[2].stack_id, 3u);
    EXPECT_EQ(t.sites[3].stack_id, 0u);
    EXPECT_EQ(t.sites[3].blocks, 1u);
    uint64_t sum = std::accumulate(t.sites.begin(), t.sites.end(), uint64_t{0},
                                   [](uint64_t a, const Site& s) { return a + s.bytes; });
    EXPECT_EQ(sum, t.total_bytes);

    SiteTable pinned = group_by_site(r, exit, KindFilter::Pinned);
    ASSERT_EQ(pinned.sites.size(), 1u);
    EXPECT_EQ(pinned.sites[0].bytes, 999u);
    SiteTable all = group_by_site(r, exit, KindFilter::All);
    EXPECT_EQ(all.total_bytes, 1749u);
    EXPECT_EQ(all.sites[0].stack_id, 1u);  // 1149 bytes with the pinned block
}

TEST(Sites, KindFilter) {
    EXPECT_TRUE(kind_matches(Kind::Device, KindFilter::Gpu));
    EXPECT_TRUE(kind_matches(Kind::Managed, KindFilter::Gpu));
    EXPECT_FALSE(kind_matches(Kind::Pinned, KindFilter::Gpu));
    EXPECT_TRUE(kind_matches(Kind::Pinned, KindFilter::Pinned));
    EXPECT_FALSE(kind_matches(Kind::Async, KindFilter::Pinned));
    EXPECT_TRUE(kind_matches(Kind::Pinned, KindFilter::All));
}

}  // namespace
}  // namespace memguard::report

// Derived figures: summary, peak, live set at a time, grouping by site.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "report/analysis.h"
#include "report/captures.h"
#include "report/collections.h"
#include "report/timeline.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::parse;

constexpr uint64_t MiB = 1 << 20;

std::string alloc(int64_t t, uint64_t tid, const std::string& addr, uint64_t size, const std::string& kind,
                  int device = 0, uint32_t stack = 0) {
    return "A " + std::to_string(t) + " " + std::to_string(tid) + " " + addr + " " + std::to_string(size) + " " + kind +
           " cudaMalloc " + std::to_string(device) + " - " + std::to_string(stack) + "\n";
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
                     free_(300, 1, "a0") +                                                              // 1 MiB
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

// Sizes near 2^64: byte totals, levels and site tables stop at UINT64_MAX instead of wrapping
// to a small number (three blocks of 2^63 bytes summed to 2^63).
TEST(Summary, ByteTotalsStopAtTheLimitInsteadOfWrapping) {
    const uint64_t half = uint64_t{1} << 63;
    Report r = parse(alloc(1, 1, "1000", half, "device", 0, 1) + alloc(2, 1, "2000", half, "device", 0, 1) +
                     alloc(3, 1, "3000", half, "device", 0, 1) + "Z 4\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.by_kind[kind_index(Kind::Device)].bytes_allocated, UINT64_MAX);
    EXPECT_EQ(s.by_device.at(0).bytes_allocated, UINT64_MAX);
    EXPECT_EQ(s.peak_bytes, UINT64_MAX);
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(2));
    EXPECT_EQ(s.live_bytes_at_exit, UINT64_MAX);
    SiteTable sites = group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu);
    EXPECT_EQ(sites.total_bytes, UINT64_MAX);
    ASSERT_EQ(sites.sites.size(), 1u);
    EXPECT_EQ(sites.sites[0].bytes, UINT64_MAX);
    EXPECT_EQ(sites.sites[0].blocks, 3u);
}

// A level that passed 2^64 and then went down: three blocks of 2^63 bytes, one freed. The level is
// held exactly (2^64 at exit, shown as UINT64_MAX), as the site table sums the blocks still live; a
// level that saturated and then subtracted would say 2^63 (the fuzzer's finding with a physical
// handle of 2^64 - 1 bytes).
TEST(Summary, ALevelPastTheLimitThatGoesDownAgreesWithTheSites) {
    const uint64_t half = uint64_t{1} << 63;
    Report r = parse(alloc(1, 1, "1000", half, "device", 0, 1) + alloc(2, 1, "2000", half, "device", 0, 1) +
                     alloc(3, 1, "3000", half, "device", 0, 1) + free_(4, 1, "1000") + "Z 5\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.live_bytes_at_exit, UINT64_MAX);
    EXPECT_EQ(s.by_device.at(0).live_bytes_at_exit, UINT64_MAX);
    EXPECT_EQ(group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu).total_bytes, UINT64_MAX);
    // Two blocks freed: 2^63 live, exactly.
    Report r2 = parse(alloc(1, 1, "1000", half, "device", 0, 1) + alloc(2, 1, "2000", half, "device", 0, 1) +
                      alloc(3, 1, "3000", half, "device", 0, 1) + free_(4, 1, "1000") + free_(5, 1, "2000") + "Z 6\n");
    EXPECT_EQ(summarize(r2).live_bytes_at_exit, half);
    EXPECT_EQ(summarize(r2).peak_bytes, UINT64_MAX);
}

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

// --- format 1.1 and 1.2: sites with Python stacks, pools, captures, hazards, collections ------------

const std::string kMinor2 = "I format_minor 2\n";

/// An A record of format 1.2: device memory from cudaMalloc on device 0, no stream.
std::string alloc2(int64_t t, uint64_t tid, const std::string& addr, uint64_t size, uint32_t stack, uint32_t capture,
                   uint32_t python, const std::string& kind = "device") {
    return "A " + std::to_string(t) + " " + std::to_string(tid) + " " + addr + " " + std::to_string(size) + " " + kind +
           " cudaMalloc " + (kind == "pinned" ? "-1" : "0") + " - " + std::to_string(stack) + " " +
           std::to_string(capture) + " " + std::to_string(python) + "\n";
}

TEST(Sites, ThePythonStackIsPartOfTheSite) {
    Report r = parse(kMinor2 + "p 1 1 f /a.py\nP 1 1\nP 2 1\n" + alloc2(1, 1, "a0", 100, 5, 0, 1) +
                     alloc2(2, 1, "b0", 100, 5, 0, 2) + alloc2(3, 1, "c0", 50, 5, 0, 1) +
                     alloc2(4, 1, "d0", 100, 5, 0, 0) + alloc2(5, 1, "e0", 100, 4, 0, 2) + "Z 9\n");
    SiteTable t = group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu);
    ASSERT_EQ(t.sites.size(), 4u);
    EXPECT_EQ(t.sites[0].stack_id, 5u);  // 150 bytes in 2 blocks
    EXPECT_EQ(t.sites[0].python_stack_id, 1u);
    EXPECT_EQ(t.sites[0].bytes, 150u);
    // 100 bytes in 1 block each: by stack id, then by Python stack id.
    EXPECT_EQ(t.sites[1].stack_id, 4u);
    EXPECT_EQ(t.sites[1].python_stack_id, 2u);
    EXPECT_EQ(t.sites[2].stack_id, 5u);
    EXPECT_EQ(t.sites[2].python_stack_id, 0u);
    EXPECT_EQ(t.sites[3].stack_id, 5u);
    EXPECT_EQ(t.sites[3].python_stack_id, 2u);
    EXPECT_EQ(t.total_bytes, 450u);
}

TEST(Pools, OrdinaryFirstThenCapturesByIdWithTheirOwnSites) {
    Report r = parse(kMinor2 + "C 1 1 2 7fab relaxed -\nC 1 1 1 7fac global -\n" + alloc2(2, 1, "a0", 10, 1, 2, 0) +
                     alloc2(3, 1, "b0", 20, 1, 0, 0) + alloc2(4, 1, "c0", 30, 2, 1, 0) +
                     alloc2(5, 1, "d0", 40, 1, 2, 0) + alloc2(6, 1, "e0", 1000, 1, 1, 0, "pinned") + free_(7, 1, "c0") +
                     "Z 9\n");
    LiveSet exit = live_at(r, {TimePoint::Exit, 0});
    std::vector<Pool> pools = group_by_pool(r, exit, KindFilter::Gpu);
    ASSERT_EQ(pools.size(), 2u);  // capture 1's only GPU block was freed; its pinned block is filtered out
    EXPECT_EQ(pools[0].capture_id, 0u);
    EXPECT_EQ(pools[0].table.total_bytes, 20u);
    EXPECT_EQ(pools[1].capture_id, 2u);
    EXPECT_EQ(pools[1].table.total_bytes, 50u);
    EXPECT_EQ(pools[1].table.total_blocks, 2u);
    ASSERT_EQ(pools[1].table.sites.size(), 1u);
    EXPECT_EQ(pools[1].table.sites[0].bytes, 50u);
    std::vector<Pool> all = group_by_pool(r, exit, KindFilter::All);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[1].capture_id, 1u);
    EXPECT_EQ(all[1].table.total_bytes, 1000u);
    uint64_t sum = 0;
    for (const Pool& p : all) sum += p.table.total_bytes;
    EXPECT_EQ(sum, group_by_site(r, exit, KindFilter::All).total_bytes);
    // At t=4 c0 is live in capture 1's pool.
    std::vector<Pool> at4 = group_by_pool(r, live_at(r, {TimePoint::Time, 4}), KindFilter::Gpu);
    ASSERT_EQ(at4.size(), 3u);
    EXPECT_EQ(at4[1].capture_id, 1u);
    EXPECT_EQ(at4[1].table.total_bytes, 30u);
    EXPECT_TRUE(group_by_pool(r, live_at(r, {TimePoint::Time, 0}), KindFilter::Gpu).empty());
}

// Capture 1: ended with graph aa, exec e0 replayed 3 times then destroyed, graph destroyed.
// Capture 2: graph bb alive at exit, exec e0 (the handle reused) alive at exit.
// Capture 3: invalidated (901, no graph). Capture 4: never ended.
const std::string kCaptures = kMinor2 + "C 10 1 1 7fab relaxed -\n" + "A 11 1 a0 100 device cudaMalloc 0 - 0 1 0\n" +
                              "A 12 1 a1 50 device cudaMalloc 0 - 0 1 0\n" + "c 13 1 1 0 aa\n" + "G 14 1 e0 aa 1\n" +
                              "L 15 1 e0 7fab\nL 16 1 e0 7fab\nL 17 1 e0 7fab\n" + "F 18 1 a1 50 cudaFree -\n" +
                              "D 19 1 e0\nK 20 1 aa\n" + "C 30 2 2 7fac global -\n" +
                              "A 31 2 b0 7 async cudaMallocAsync 0 7fac 0 2 0\n" + "c 32 2 2 0 bb\n" +
                              "G 33 2 e0 bb 2\nL 34 2 e0 7fac\n" + "C 40 3 3 7fad thread_local -\nc 41 3 3 901 -\n" +
                              "G 42 1 e9 cc 0\nL 43 1 e9 7fab\n" + "C 50 4 4 7fae global -\n" +
                              "A 51 4 d0 9 device cudaMalloc 0 - 0 4 0\nZ 60\n";

TEST(Captures, OwnedMemoryExecsLaunchesAndDestruction) {
    Report r = parse(kCaptures);
    ASSERT_TRUE(r.warnings.empty()) << r.warnings[0];
    std::vector<CaptureStats> s = capture_stats(r);
    ASSERT_EQ(s.size(), 4u);
    EXPECT_EQ(s[0].capture->id, 1u);
    EXPECT_EQ(s[0].execs, std::vector<size_t>{0});
    EXPECT_EQ(s[0].launches, 3u);
    EXPECT_EQ(s[0].owned_bytes, 150u);  // freed blocks count too
    EXPECT_EQ(s[0].owned_blocks, 2u);
    EXPECT_EQ(s[0].live_owned_bytes_at_exit, 100u);
    EXPECT_EQ(s[0].live_owned_blocks_at_exit, 1u);
    EXPECT_FALSE(s[0].graph_alive_at_exit);
    EXPECT_EQ(s[0].execs_alive_at_exit, 0u);
    EXPECT_TRUE(s[0].destroyed);

    EXPECT_EQ(s[1].execs, std::vector<size_t>{1});
    EXPECT_EQ(s[1].launches, 1u);
    EXPECT_EQ(s[1].owned_bytes, 7u);
    EXPECT_EQ(s[1].live_owned_bytes_at_exit, 7u);
    EXPECT_TRUE(s[1].graph_alive_at_exit);
    EXPECT_EQ(s[1].execs_alive_at_exit, 1u);
    EXPECT_FALSE(s[1].destroyed);

    EXPECT_TRUE(s[2].execs.empty());
    EXPECT_EQ(s[2].owned_bytes, 0u);
    EXPECT_FALSE(s[2].graph_alive_at_exit);
    EXPECT_TRUE(s[2].destroyed);  // it ended without a graph: nothing of it is left

    EXPECT_EQ(s[3].owned_bytes, 9u);
    EXPECT_FALSE(s[3].destroyed);  // still capturing

    Summary sum = summarize(r);
    EXPECT_EQ(sum.captures, 4u);
    EXPECT_EQ(sum.execs, 3u);
    EXPECT_EQ(sum.launches, 5u);  // e9 from no capture included
    EXPECT_EQ(sum.graphs_alive_at_exit, 1u);
    EXPECT_EQ(sum.execs_alive_at_exit, 2u);  // e0 (capture 2) and e9
    EXPECT_EQ(sum.hazards(), 0u);
}

TEST(Captures, GraphDestroyedButExecAliveIsNotDestroyed) {
    Report r = parse(kMinor2 + "C 1 1 1 7fab relaxed -\nc 2 1 1 0 aa\nG 3 1 e0 aa 1\nK 4 1 aa\nZ 9\n");
    std::vector<CaptureStats> s = capture_stats(r);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_FALSE(s[0].graph_alive_at_exit);
    EXPECT_EQ(s[0].execs_alive_at_exit, 1u);
    EXPECT_FALSE(s[0].destroyed);
    Report r2 = parse(kMinor2 + "C 1 1 1 7fab relaxed -\nc 2 1 1 0 aa\nG 3 1 e0 aa 1\nD 4 1 e0\nZ 9\n");
    EXPECT_FALSE(capture_stats(r2)[0].destroyed);  // the graph lives on
}

TEST(Captures, StatsAreInCaptureIdOrder) {
    Report r = parse(kMinor2 + "C 1 1 3 7fab relaxed -\nC 2 1 1 7fac relaxed -\nZ 9\n");
    std::vector<CaptureStats> s = capture_stats(r);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].capture->id, 1u);
    EXPECT_EQ(s[1].capture->id, 3u);
}

TEST(Hazards, RetentionBoundariesMergeSitesAndComeBiggestFirst) {
    Report r = parse(kMinor2 + "C 10 1 1 7fab relaxed -\nC 30 1 2 7fab relaxed -\n"
                               "W 10 1 warmup_retention 1 begin 0 5 1 100\n"
                               "W 10 1 warmup_retention 1 begin 0 6 2 300\n"
                               "W 20 1 warmup_retention 1 end 0 5 1 100\n"
                               "W 30 1 warmup_retention 2 begin 20 7 4 400\n"
                               "W 30 1 warmup_retention 2 begin 20 5 1 50\n"
                               "W 30 1 warmup_retention 2 begin 20 7 1 50\n"  // the same site again: merged
                               "W 40 1 warmup_retention 2 end 20 8 1 100\nZ 50\n");
    std::vector<RetentionBoundary> b = retention_boundaries(r);
    ASSERT_EQ(b.size(), 4u);
    EXPECT_EQ(b[0].capture_id, 2u);
    EXPECT_EQ(b[0].phase, CapturePhase::Begin);
    EXPECT_EQ(b[0].t, 30);
    EXPECT_EQ(b[0].since, 20);
    EXPECT_EQ(b[0].bytes, 500u);
    EXPECT_EQ(b[0].blocks, 6u);
    ASSERT_EQ(b[0].sites.size(), 2u);
    EXPECT_EQ(b[0].sites[0].stack_id, 7u);
    EXPECT_EQ(b[0].sites[0].bytes, 450u);
    EXPECT_EQ(b[0].sites[0].blocks, 5u);
    EXPECT_EQ(b[0].sites[1].stack_id, 5u);
    EXPECT_EQ(b[1].capture_id, 1u);  // 400 bytes
    EXPECT_EQ(b[1].phase, CapturePhase::Begin);
    EXPECT_EQ(b[1].sites[0].stack_id, 6u);
    // 100 bytes in 1 block each: earlier first.
    EXPECT_EQ(b[2].capture_id, 1u);
    EXPECT_EQ(b[2].phase, CapturePhase::End);
    EXPECT_EQ(b[3].capture_id, 2u);
    EXPECT_EQ(b[3].phase, CapturePhase::End);
    Summary s = summarize(r);
    EXPECT_EQ(s.warmup_retention, 4u);
    EXPECT_EQ(s.hazards(), 4u);
}

TEST(Hazards, SummaryCountsEachKind) {
    Report r = parse(kMinor2 + "C 1 1 1 7fab global -\n" + alloc2(2, 1, "a0", 64, 0, 1, 0) + "c 3 1 1 0 aa\n" +
                     "G 4 1 e0 aa 1\nF 5 1 a0 64 cudaFree -\nW 5 1 free_live_graph a0 64 1 e0\n"
                     "W 6 2 unsafe_call cudaMalloc 1 global global\nW 7 2 unsafe_call cudaFree 1 global global\nZ 9\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.unsafe_calls, 2u);
    EXPECT_EQ(s.frees_while_graph_alive, 1u);
    EXPECT_EQ(s.warmup_retention, 0u);
    EXPECT_EQ(s.hazards(), 3u);
}

TEST(Collections, TotalsPerTriggerAndWhatIsListed) {
    Report r = parse(kMinor2 + "Y 1 1 automatic 0 100 5 0 0 - -\nY 2 1 automatic 2 200 7 1 4096 - -\n"
                               "Y 3 1 automatic 1 300 9 0 - - -\nY 4 1 explicit 2 1000 3 0 -512 - -\n"
                               "Y 5 1 memguard 2 5000 11 2 2048 0/0 70\nY 6 1 memguard 2 7000 13 0 - 0/1,0/2 80\n"
                               "X 7 1 0/3\nZ 9\n");
    auto t = collection_totals(r);
    const TriggerTotals& a = t[trigger_index(GcTrigger::Automatic)];
    EXPECT_EQ(a.count, 3u);
    EXPECT_EQ(a.duration_ns, 600);
    EXPECT_EQ(a.collected, 21);
    EXPECT_EQ(a.uncollectable, 1);
    EXPECT_EQ(a.cuda_bytes_freed, 4096);
    EXPECT_EQ(a.with_cuda, 2u);
    const TriggerTotals& e = t[trigger_index(GcTrigger::Explicit)];
    EXPECT_EQ(e.count, 1u);
    EXPECT_EQ(e.cuda_bytes_freed, -512);
    const TriggerTotals& m = t[trigger_index(GcTrigger::Memguard)];
    EXPECT_EQ(m.count, 2u);
    EXPECT_EQ(m.duration_ns, 12000);
    EXPECT_EQ(m.collected, 24);
    EXPECT_EQ(m.uncollectable, 2);
    EXPECT_EQ(m.cuda_bytes_freed, 2048);
    EXPECT_EQ(m.with_cuda, 1u);

    std::vector<bool> listed, listed_all;
    for (const Collection& c : r.collections) {
        listed.push_back(collection_listed(c, false));
        listed_all.push_back(collection_listed(c, true));
    }
    EXPECT_EQ(listed, (std::vector<bool>{false, true, false, true, true, true}));
    EXPECT_EQ(listed_all, std::vector<bool>(6, true));

    Summary s = summarize(r);
    EXPECT_EQ(s.collections, (std::array<uint64_t, kTriggerCount>{3, 1, 2, 0, 0}));
    EXPECT_EQ(s.cuda_bytes_freed, (std::array<int64_t, kTriggerCount>{4096, -512, 2048, 0, 0}));
    EXPECT_EQ(s.compiles, 1u);
}

// Minor 9: the skipped chances and explanations per trigger, memguard's three triggers together,
// bytes per millisecond and the share of the budget (time / (gc_budget x end_t), for memguard's
// triggers only, and only when the report names the budget).
TEST(Collections, BudgetUsedAndSkippedChancesPerTrigger) {
    const std::string body = "Y 1 1 automatic 0 100000 5 0 1048576 - - - -\n"
                             "j 2 1 1 10 1 2097152 50000 1\n"
                             "Y 3 1 memguard 2 2000000 11 0 2097152 0/0 70 0 1\n"
                             "Y 4 1 step 1 1000000 0 0 0 - - 5 -\nY 5 1 step 1 1000000 0 0 - - - 2 -\n"
                             "Y 6 1 recompute 2 4000000 9 0 -1024 - - 0 -\nZ 1000000000\n";
    Report r = parse("I format_minor 9\nI gc_budget 0.02\n" + body);
    ASSERT_EQ(r.gc_budget, std::optional<double>(0.02));
    auto t = collection_totals(r);
    const TriggerTotals& step = t[trigger_index(GcTrigger::Step)];
    EXPECT_EQ(step.count, 2u);
    EXPECT_EQ(step.skipped, 7u);
    EXPECT_EQ(step.with_skipped, 2u);
    EXPECT_EQ(step.with_cuda, 1u);
    EXPECT_EQ(t[trigger_index(GcTrigger::Memguard)].explained, 1u);
    EXPECT_EQ(t[trigger_index(GcTrigger::Automatic)].with_skipped, 0u);

    const TriggerTotals ours = memguards_totals(t);
    EXPECT_EQ(ours.count, 4u);  // not the automatic one
    EXPECT_EQ(ours.duration_ns, 8000000);
    EXPECT_EQ(ours.cuda_bytes_freed, 2097152 - 1024);
    EXPECT_EQ(ours.skipped, 7u);
    EXPECT_EQ(ours.explained, 1u);

    // 2 MiB in 2 ms; 1 MiB in 0.1 ms; nothing known of CUDA: none.
    auto near = [](const std::optional<double>& v, double want) {
        return v && *v > want * (1 - 1e-12) && *v < want * (1 + 1e-12);
    };
    EXPECT_TRUE(near(bytes_per_ms(t[trigger_index(GcTrigger::Memguard)]), 1048576.0));
    EXPECT_TRUE(near(bytes_per_ms(t[trigger_index(GcTrigger::Automatic)]), 10485760.0));
    EXPECT_FALSE(bytes_per_ms(t[trigger_index(GcTrigger::Explicit)]).has_value());

    // The budget: 0.02 x 1 s = 20 ms. compile used 2 ms, all of memguard's 8 ms.
    EXPECT_TRUE(near(budget_used(r, GcTrigger::Memguard, t[trigger_index(GcTrigger::Memguard)]), 0.1));
    EXPECT_TRUE(near(budget_used(r, GcTrigger::Recompute, t[trigger_index(GcTrigger::Recompute)]), 0.2));
    EXPECT_TRUE(near(budget_used(r, ours), 0.4));
    EXPECT_FALSE(budget_used(r, GcTrigger::Automatic, t[trigger_index(GcTrigger::Automatic)]).has_value());
    EXPECT_STREQ(trigger_label(GcTrigger::Memguard), "compile");
    EXPECT_STREQ(trigger_label(GcTrigger::Step), "step");

    // Without I gc_budget there is no share of it.
    Report old = parse("I format_minor 9\n" + body);
    EXPECT_FALSE(budget_used(old, memguards_totals(collection_totals(old))).has_value());
}

// A report can hold any int64 in a collection's fields: the totals are exact where they fit and
// clamped where not, never wrapped (signed overflow, which UBSan reports; `cycles` printed a
// negative total).
TEST(Collections, TotalsNearTheInt64LimitsAreExactOrClampedNeverWrapped) {
    const std::string max = std::to_string(INT64_MAX), dur = std::to_string(kMaxTimeNs);
    Report r = parse(kMinor2 + "Y 1 1 automatic 0 " + dur + " " + max + " -" + max + " " + max + " - -\n" +
                     "Y 2 1 automatic 0 " + dur + " " + max + " -" + max + " " + max + " - -\n" + "Y 3 1 automatic 0 " +
                     dur + " 1 -1 -" + max + " - -\n" + "Y 4 1 explicit 0 5 " + max + " 0 -" + max +
                     " - -\nY 5 1 explicit 0 7 -3 0 -" + max + " - -\n" + "Z 9\n");
    auto t = collection_totals(r);
    const TriggerTotals& a = t[trigger_index(GcTrigger::Automatic)];
    EXPECT_EQ(a.count, 3u);
    EXPECT_EQ(a.duration_ns, INT64_MAX);  // 3 * (2^62 - 1) does not fit
    EXPECT_EQ(a.collected, INT64_MAX);
    EXPECT_EQ(a.uncollectable, INT64_MIN);
    EXPECT_EQ(a.cuda_bytes_freed, INT64_MAX);  // max + max - max: exact, though a partial sum did not fit
    const TriggerTotals& e = t[trigger_index(GcTrigger::Explicit)];
    EXPECT_EQ(e.duration_ns, 12);
    EXPECT_EQ(e.collected, INT64_MAX - 3);
    EXPECT_EQ(e.cuda_bytes_freed, INT64_MIN);
    Summary s = summarize(r);
    EXPECT_EQ(s.cuda_bytes_freed, (std::array<int64_t, kTriggerCount>{INT64_MAX, INT64_MIN, 0}));
}

// phase_stats keeps the open phases per family and lets ended ones go through a heap (O(n log n));
// the depth and parent must be what the definition says, checked here by its direct O(n^2)
// reading on random nestings, overlaps, threads and sources.
TEST(Phases, DepthAndParentMatchTheDefinitionOnRandomPhases) {
    std::mt19937 rng(20251201u);
    const char* sources[] = {"api", "nvtx", "nvtx_range"};
    for (int iter = 0; iter < 200; ++iter) {
        std::string body = "I format_minor 4\n";
        std::vector<uint32_t> open;
        uint32_t next_id = 1;
        for (int step = 0; step < 60; ++step) {
            if (open.empty() || rng() % 3 != 0) {
                body += "B " + std::to_string(step) + " " + std::to_string(1 + rng() % 3) + " " +
                        std::to_string(next_id) + " " + sources[rng() % 3] + " p" + std::to_string(rng() % 4) + "\n";
                open.push_back(next_id++);
            } else {
                size_t k = rng() % open.size();  // not only the innermost: ranges and other threads overlap
                body += "b " + std::to_string(step) + " 1 " + std::to_string(open[k]) + "\n";
                open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
            }
        }
        Report r = parse(body + "Z 100\n");
        std::vector<PhaseStats> stats = phase_stats(r, build_timeline(r));
        ASSERT_EQ(stats.size(), r.phases.size());
        for (size_t i = 0; i < r.phases.size(); ++i) {
            const Phase& p = r.phases[i];
            int depth = 0;
            std::optional<uint32_t> parent;
            for (size_t j = 0; j < i; ++j) {
                const Phase& q = r.phases[j];
                bool still_open = q.end_line == 0 || q.end_line > p.begin_line;
                bool same_family = p.source == PhaseSource::NvtxRange
                                       ? q.source == PhaseSource::NvtxRange
                                       : q.source != PhaseSource::NvtxRange && q.tid == p.tid;
                if (still_open && same_family) {
                    ++depth;
                    parent = q.id;
                }
            }
            EXPECT_EQ(stats[i].depth, depth) << "phase " << p.id << " of\n" << body;
            EXPECT_EQ(stats[i].parent, parent) << "phase " << p.id << " of\n" << body;
        }
    }
}

TEST(Collections, NoneAtAll) {
    Report r = parse("Z 1\n");
    auto t = collection_totals(r);
    for (const TriggerTotals& x : t) {
        EXPECT_EQ(x.count, 0u);
        EXPECT_EQ(x.cuda_bytes_freed, 0);
    }
    Summary s = summarize(r);
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.captures, 0u);
}

}  // namespace
}  // namespace memguard::report

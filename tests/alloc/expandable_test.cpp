// Expandable segments (expandable_segments:True): the allocator grows its pools with the driver's
// virtual memory calls, as PyTorch's ExpandableSegment does, against the fake device's driver
// rules (granularity, mappings inside reservations, no double map, out of memory at create).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "alloc/caching_allocator.h"
#include "alloc/testing/fake_backend.h"

namespace memguard::alloc {
namespace {

using testing::FakeBackend;

constexpr size_t MiB = 1024 * 1024;
constexpr Stream kS1 = 0x11, kS2 = 0x22, kCap = 0xC0;

uintptr_t u(void* p) { return reinterpret_cast<uintptr_t>(p); }

AllocatorConfig expandable_config() {
    AllocatorConfig c;
    c.expandable_segments = true;
    return c;
}

class ExpandableTest : public ::testing::Test {
protected:
    explicit ExpandableTest(size_t capacity = 1024 * MiB) : fake(1, capacity), alloc(fake, 1, expandable_config()) {}

    void TearDown() override {
        EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
        EXPECT_EQ(alloc.check_invariants(0), "");
        EXPECT_EQ(fake.vmm(0).inaccessible_mappings, 0u) << "a mapping without cuMemSetAccess";
    }

    void* get(size_t size, Stream s = kS1) {
        int err = -1;
        void* p = alloc.malloc(0, size, s, 0, &err);
        EXPECT_EQ(err, kSuccess) << "size " << size;
        EXPECT_NE(p, nullptr);
        if (p && fake.reservation_of(0, u(p)) != 0) {
            EXPECT_TRUE(fake.accessible(0, u(p), size)) << "block not mapped with access at " << p;
        }
        return p;
    }
    int64_t stat(const char* key) {
        for (const auto& [k, v] : memory_stats_items(alloc.stats(0)))
            if (k == key) return v;
        ADD_FAILURE() << "no stat " << key;
        return -1;
    }
    void check() { ASSERT_EQ(alloc.check_invariants(0), ""); }

    FakeBackend fake;
    CachingAllocator alloc;
};

TEST_F(ExpandableTest, GrowsByMappingPagesInsteadOfNewSegments) {
    void* a = get(30 * MiB);  // maps two 20 MiB pages; 10 MiB stay free at the end
    check();
    EXPECT_EQ(fake.malloc_calls(), 0u);
    auto v = fake.vmm(0);
    EXPECT_EQ(v.reserves, 1u);
    EXPECT_EQ(v.creates, 2u);
    EXPECT_EQ(v.maps, 2u);
    EXPECT_EQ(v.set_access, 1u);
    size_t range = 0;
    EXPECT_EQ(fake.reservation_of(0, u(a), &range), u(a)) << "the first block starts the range";
    // 1 1/8 of the device's memory, in 20 MiB pages.
    EXPECT_EQ(range, (1024 + 128 + 19) / 20 * 20 * MiB);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(40 * MiB));
    EXPECT_EQ(stat("reserved_bytes.large_pool.current"), int64_t(40 * MiB));
    EXPECT_EQ(stat("segment.all.current"), 0) << "PyTorch does not count expandable segments";
    EXPECT_EQ(stat("num_device_alloc"), 1);
    EXPECT_EQ(stat("inactive_split.all.current"), 0) << "PyTorch leaves expandable blocks out";

    // The next block uses the free end and one more page: it follows the first one.
    void* b = get(25 * MiB);
    check();
    EXPECT_EQ(u(b), u(a) + 30 * MiB);
    v = fake.vmm(0);
    EXPECT_EQ(v.reserves, 1u);
    EXPECT_EQ(v.creates, 3u);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(60 * MiB));
    EXPECT_EQ(stat("num_device_alloc"), 2);
    EXPECT_EQ(fake.malloc_calls(), 0u);
}

TEST_F(ExpandableTest, FreedBlocksAreReusedWithoutMapping) {
    void* a = get(30 * MiB);
    void* b = get(25 * MiB);
    ASSERT_TRUE(alloc.free(b));
    check();
    EXPECT_EQ(u(get(25 * MiB)), u(b));
    EXPECT_EQ(fake.vmm(0).creates, 3u);
    ASSERT_TRUE(alloc.free(a));
    EXPECT_EQ(u(get(12 * MiB)), u(a));
    EXPECT_EQ(fake.vmm(0).creates, 3u);
}

TEST_F(ExpandableTest, BestFitKeepsTheSegmentEndForRequestsThatNeedIt) {
    void* x = get(35 * MiB);  // two pages: x, then 5 MiB free
    void* y = get(5 * MiB);   // takes the 5 MiB
    void* z = get(30 * MiB);  // two more pages: z, then 10 MiB free at the end
    EXPECT_EQ(u(y), u(x) + 35 * MiB);
    EXPECT_EQ(u(z), u(x) + 40 * MiB);
    ASSERT_TRUE(alloc.free(x));  // 35 MiB free in the middle
    check();
    // The 10 MiB at the end fit more tightly, but could grow into the unmapped rest: PyTorch
    // counts them as that large, and takes the block in the middle.
    EXPECT_EQ(u(get(8 * MiB)), u(x));
    (void)y;
}

TEST_F(ExpandableTest, EmptyCacheUnmapsWhollyFreePagesAndRefillsTheLowestGap) {
    void* a = get(30 * MiB);  // pages 0-1
    void* b = get(30 * MiB);  // 10 MiB left of page 1, and page 2
    EXPECT_EQ(u(b), u(a) + 30 * MiB);
    ASSERT_TRUE(alloc.free(a));
    ASSERT_TRUE(alloc.empty_cache());
    check();
    // Page 0 was wholly free; page 1 holds the start of b.
    auto v = fake.vmm(0);
    EXPECT_EQ(v.unmaps, 1u);
    EXPECT_EQ(v.releases, 1u);
    EXPECT_GE(v.stream_syncs, 1u) << "no synchronization before the unmap";
    EXPECT_EQ(v.mapped_bytes, 40 * MiB);
    EXPECT_EQ(v.live_handles, 2u);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(40 * MiB));
    EXPECT_EQ(stat("num_device_free"), 1);

    // A request that fits the gap maps page 0 again, at the lowest address.
    void* c = get(15 * MiB);
    check();
    EXPECT_EQ(u(c), u(a));
    EXPECT_EQ(fake.vmm(0).creates, 4u);

    // With everything free, empty_cache unmaps it all and gives the range back.
    ASSERT_TRUE(alloc.free(b));
    ASSERT_TRUE(alloc.free(c));
    ASSERT_TRUE(alloc.empty_cache());
    check();
    v = fake.vmm(0);
    EXPECT_EQ(v.live_reservations, 0u);
    EXPECT_EQ(v.address_frees, 1u);
    EXPECT_EQ(v.live_handles, 0u);
    EXPECT_EQ(v.physical_bytes, 0u);
    EXPECT_EQ(stat("reserved_bytes.all.current"), 0);
    EXPECT_EQ(alloc.snapshot(0).size(), 0u);

    // And a new allocation reserves a new range.
    get(3 * MiB);
    EXPECT_EQ(fake.vmm(0).reserves, 2u);
}

TEST_F(ExpandableTest, SnapshotReportsEachMappedRunAsASegment) {
    void* a = get(30 * MiB);
    void* b = get(30 * MiB);
    ASSERT_TRUE(alloc.free(a));
    ASSERT_TRUE(alloc.empty_cache());  // page 0 unmapped: one run from page 1 on
    std::vector<BlockInfo> blocks = alloc.snapshot(0);
    size_t total = 0;
    for (const BlockInfo& i : blocks) {
        EXPECT_TRUE(i.expandable);
        EXPECT_EQ(i.segment, u(a) + 20 * MiB) << "the run starts at page 1";
        total += i.size;
    }
    EXPECT_EQ(total, 40 * MiB) << "unmapped space is not reported";
    ASSERT_EQ(blocks.size(), 2u);  // free 10 MiB, then b up to the end of page 2
    EXPECT_EQ(blocks[0].state, BlockInfo::State::Free);
    EXPECT_EQ(blocks[1].ptr, u(b));
    EXPECT_EQ(blocks[1].state, BlockInfo::State::Allocated);
}

class ExpandableSmallDeviceTest : public ExpandableTest {
protected:
    ExpandableSmallDeviceTest() : ExpandableTest(100 * MiB) {}
};

TEST_F(ExpandableSmallDeviceTest, OutOfMemoryWhileMappingUnmapsTheCacheAndRetries) {
    void* a = get(60 * MiB);  // three pages
    get(20 * MiB);            // a fourth: 80 MiB of 100 are physical memory now
    ASSERT_TRUE(alloc.free(a));
    // Another stream needs two pages: the second cuMemCreate runs out of memory, the first page is
    // released again, the cache is unmapped, and the retry maps both.
    void* c = get(40 * MiB, kS2);
    check();
    EXPECT_NE(fake.reservation_of(0, u(c)), fake.reservation_of(0, u(a))) << "one range per stream";
    EXPECT_EQ(stat("num_alloc_retries"), 1);
    EXPECT_EQ(stat("num_ooms"), 0);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(60 * MiB));
    auto v = fake.vmm(0);
    EXPECT_EQ(v.physical_bytes, 60 * MiB);
    EXPECT_EQ(v.live_handles, v.creates - v.releases);

    // Nothing more can be freed: the request fails, and no page of the failed call stays.
    const size_t handles = v.live_handles;
    int err = -1;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 60 * MiB, kS1, 0, &err, &oom), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_EQ(stat("num_ooms"), 1);
    EXPECT_EQ(oom.segment_size, 60 * MiB);
    EXPECT_EQ(fake.vmm(0).live_handles, handles);
    check();
}

TEST_F(ExpandableTest, MapFailureOtherThanOutOfMemoryIsReturnedAndLeavesNothing) {
    fake.fail_next_vmm_maps(1, 999);
    int err = -1;
    EXPECT_EQ(alloc.malloc(0, 30 * MiB, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, 999);
    auto v = fake.vmm(0);
    EXPECT_EQ(v.live_handles, 0u);
    EXPECT_EQ(v.mapped_bytes, 0u);
    EXPECT_EQ(stat("reserved_bytes.all.current"), 0);
    check();
    get(30 * MiB);
}

TEST_F(ExpandableTest, EachStreamGrowsItsOwnRange) {
    void* a = get(5 * MiB, kS1);
    void* b = get(5 * MiB, kS2);
    EXPECT_EQ(fake.vmm(0).reserves, 2u);
    EXPECT_NE(fake.reservation_of(0, u(a)), fake.reservation_of(0, u(b)));
    ASSERT_TRUE(alloc.free(a));
    void* c = get(5 * MiB, kS2);
    EXPECT_NE(u(c), u(a)) << "a block freed on one stream served another";
    EXPECT_EQ(fake.reservation_of(0, u(c)), fake.reservation_of(0, u(b)));
}

TEST_F(ExpandableTest, TheSmallPoolGrowsInTwoMebibytePages) {
    void* a = get(1000);
    void* b = get(2000);
    EXPECT_EQ(u(b), u(a) + 1024);
    auto v = fake.vmm(0);
    EXPECT_EQ(v.reserves, 1u);
    EXPECT_EQ(v.creates, 1u);
    EXPECT_EQ(v.physical_bytes, 2 * MiB);
    EXPECT_EQ(stat("reserved_bytes.small_pool.current"), int64_t(2 * MiB));
    size_t range = 0;
    fake.reservation_of(0, u(a), &range);
    EXPECT_EQ(range, 1152 * MiB);  // 1 1/8 of 1 GiB in 2 MiB pages
    get(30 * MiB);
    EXPECT_EQ(fake.vmm(0).reserves, 2u) << "the large pool has its own range";
}

TEST_F(ExpandableTest, PagesFollowTheDeviceGranularity) {
    fake.set_vmm_granularity(8 * MiB);
    get(1000);
    EXPECT_EQ(fake.vmm(0).physical_bytes, 8 * MiB);  // 2 MiB rounded up
    get(30 * MiB);
    EXPECT_EQ(fake.vmm(0).physical_bytes, 8 * MiB + 48 * MiB);  // two 24 MiB pages
    EXPECT_EQ(stat("reserved_bytes.large_pool.current"), int64_t(48 * MiB));
}

TEST_F(ExpandableTest, WithoutTheDriverCallsSegmentsAreCudaMalloced) {
    fake.set_vmm_granularity(0);
    get(30 * MiB);
    EXPECT_EQ(fake.malloc_calls(), 1u);
    EXPECT_EQ(fake.vmm(0).reserves, 0u);
}

TEST_F(ExpandableTest, TurnedOffAtRunTimeNewMemoryIsCudaMallocedAndExpandableBlocksWait) {
    void* a = get(30 * MiB);
    ASSERT_TRUE(alloc.free(a));  // 40 MiB free, expandable
    alloc.set_expandable_segments(false);
    EXPECT_FALSE(alloc.expandable_segments());
    void* b = get(25 * MiB);
    EXPECT_NE(u(b), u(a)) << "an expandable block served an allocation with expandable segments off";
    EXPECT_EQ(fake.malloc_calls(), 1u);
    EXPECT_EQ(stat("segment.all.current"), 1);
    ASSERT_TRUE(alloc.free(b));
    alloc.set_expandable_segments(true);
    void* c = get(35 * MiB);
    EXPECT_EQ(u(c), u(a)) << "expandable blocks serve again once it is back on";
    EXPECT_EQ(fake.malloc_calls(), 1u);
    check();
}

TEST_F(ExpandableTest, MemoryFractionLimitsMapping) {
    ASSERT_EQ(alloc.set_memory_fraction(0, 0.05), kSuccess);  // 51.2 MiB
    get(30 * MiB);                                            // 40 MiB mapped
    int err = -1;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 15 * MiB, kS1, 0, &err, &oom), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_TRUE(oom.over_limit);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(40 * MiB));
    get(10 * MiB);  // fits the mapped free end
}

TEST_F(ExpandableTest, PrivatePoolsOfCapturesGrowTheirOwnRangeInRelaxedMode) {
    const MempoolId pool{7, 0};
    void* outside = get(30 * MiB, kS1);
    ASSERT_TRUE(alloc.begin_allocate_to_pool(0, pool, [](Stream s) { return s == kCap; }));
    fake.begin_capture(kCap);
    void* a = get(30 * MiB, kCap);  // maps during the capture: relaxed mode, no misuse
    void* b = get(1000, kCap);
    EXPECT_NE(fake.reservation_of(0, u(a)), fake.reservation_of(0, u(outside)));
    EXPECT_EQ(fake.vmm(0).reserves, 3u);
    EXPECT_EQ(FakeBackend::thread_capture_mode(), kCaptureModeGlobal) << "the mode was not restored";
    ASSERT_TRUE(alloc.free(a));
    EXPECT_FALSE(alloc.empty_cache()) << "empty_cache during a capture unmaps nothing";
    EXPECT_EQ(fake.vmm(0).unmaps, 0u);
    fake.end_capture(kCap);
    ASSERT_TRUE(alloc.end_allocate_to_pool(0, pool));
    ASSERT_TRUE(alloc.free(b));
    ASSERT_TRUE(alloc.release_pool(0, pool));
    ASSERT_TRUE(alloc.empty_cache());
    check();
    auto v = fake.vmm(0);
    EXPECT_EQ(v.live_reservations, 1u) << "the pool's ranges were not given back";
    EXPECT_EQ(v.physical_bytes, 40 * MiB) << "only the default pool's block stays";
    ASSERT_TRUE(alloc.free(outside));
}

/// The flat {"key": integer, ...} JSON of a memory_stats() golden.
std::map<std::string, int64_t> read_stats_json(const char* path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::map<std::string, int64_t> out;
    const std::string s = text.str();
    for (size_t q = s.find('"'); q != std::string::npos; q = s.find('"', q)) {
        const size_t end = s.find('"', q + 1);
        const size_t colon = s.find(':', end);
        out[s.substr(q + 1, end - q - 1)] = std::stoll(s.substr(colon + 1));
        q = s.find_first_of(",}", colon);
        if (q == std::string::npos) break;
    }
    return out;
}

// The workload PyTorch 2.11's own allocator ran with expandable_segments:True on an H200 (the
// golden's): the same requests give memguard's allocator the same statistics, key for key.
TEST_F(ExpandableTest, StatisticsEqualPyTorchsOnTheGoldenWorkload) {
    constexpr Stream kDefault = 0, kOther = 0x5;
    for (size_t n : {size_t{512}, size_t{4096}, MiB, 3 * MiB, 25 * MiB}) get(n, kDefault);
    ASSERT_TRUE(alloc.free(get(8 * MiB, kDefault)));
    void* on_s = get(2 * MiB, kOther);
    ASSERT_TRUE(alloc.record_stream(on_s, kDefault));
    fake.submit(kDefault);
    ASSERT_TRUE(alloc.free(on_s));  // waits for its event: still active
    check();
    const std::map<std::string, int64_t> golden = read_stats_json(MGTEST_NATIVE_EXPANDABLE_STATS);
    ASSERT_GT(golden.size(), 100u);
    size_t compared = 0;
    for (const auto& [key, value] : memory_stats_items(alloc.stats(0))) {
        auto it = golden.find(key);
        if (it == golden.end()) continue;
        // memguard's requested bytes drop at free (docs/architecture.md, "Stats"); PyTorch's when
        // the block is back in its pool: the block still waiting for its event differs.
        if (key.rfind("requested_bytes.", 0) == 0 && key.find("small_pool") == std::string::npos &&
            (key.size() > 8 &&
             (key.compare(key.size() - 8, 8, ".current") == 0 || key.compare(key.size() - 6, 6, ".freed") == 0)))
            continue;
        EXPECT_EQ(value, it->second) << key;
        ++compared;
    }
    EXPECT_GE(compared, 100u);
}

TEST(FakeVmm, KeepsTheDriversRules) {
    FakeBackend f(1, 100 * MiB);
    size_t g = 0;
    ASSERT_EQ(f.vmm_granularity(0, &g), kSuccess);
    ASSERT_EQ(g, 2 * MiB);
    uintptr_t va = 0;
    ASSERT_EQ(f.vmm_reserve(0, 8 * MiB, &va), kSuccess);
    PhysHandle h1 = 0, h2 = 0, h3 = 0;
    EXPECT_EQ(f.vmm_create(0, 3 * MiB, &h1), 1) << "not a multiple of the granularity";
    ASSERT_EQ(f.vmm_create(0, 4 * MiB, &h1), kSuccess);
    ASSERT_EQ(f.vmm_create(0, 2 * MiB, &h2), kSuccess);
    EXPECT_EQ(f.vmm_map(0, va + 6 * MiB, 4 * MiB, h1), 1) << "past the reservation";
    ASSERT_EQ(f.vmm_map(0, va, 4 * MiB, h1), kSuccess);
    EXPECT_EQ(f.vmm_map(0, va + 2 * MiB, 2 * MiB, h2), 1) << "over a mapping";
    EXPECT_EQ(f.vmm_set_access(0, va, 6 * MiB), 1) << "not wholly mapped";
    ASSERT_EQ(f.vmm_set_access(0, va, 4 * MiB), kSuccess);
    EXPECT_EQ(f.vmm_create(0, 96 * MiB, &h3), kErrorMemoryAllocation) << "out of memory at create";
    EXPECT_EQ(f.vmm_unmap(0, va, 2 * MiB), 1) << "part of a mapping";
    EXPECT_EQ(f.vmm_address_free(0, va, 8 * MiB), 1) << "still mapped";
    ASSERT_EQ(f.vmm_release(0, h1), kSuccess);
    EXPECT_EQ(f.vmm(0).physical_bytes, 6 * MiB) << "a released handle lives while mapped";
    ASSERT_EQ(f.vmm_unmap(0, va, 4 * MiB), kSuccess);
    EXPECT_EQ(f.vmm(0).physical_bytes, 2 * MiB);
    ASSERT_EQ(f.vmm_release(0, h2), kSuccess);
    ASSERT_EQ(f.vmm_address_free(0, va, 8 * MiB), kSuccess);
    EXPECT_EQ(f.misuses().size(), 6u);
    f.begin_capture(kCap);
    EXPECT_NE(f.vmm_create(0, 2 * MiB, &h3), kSuccess) << "global mode during a capture";
    EXPECT_NE(f.stream_synchronize(0, kS1), kSuccess);
    EXPECT_NE(f.vmm_address_free(0, va, 8 * MiB), kSuccess);
    int mode = kCaptureModeRelaxed;
    f.exchange_capture_mode(&mode);
    ASSERT_EQ(f.vmm_create(0, 2 * MiB, &h3), kSuccess) << "relaxed mode during a capture";
    ASSERT_EQ(f.vmm_release(0, h3), kSuccess);
    EXPECT_NE(f.stream_synchronize(0, kS1), kSuccess) << "even in relaxed mode";
    f.exchange_capture_mode(&mode);
    f.end_capture(kCap);
    EXPECT_EQ(f.misuses().size(), 10u);
}

}  // namespace
}  // namespace memguard::alloc

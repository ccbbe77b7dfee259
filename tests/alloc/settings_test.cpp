// The caching allocator's live settings and the figures the bridge answers PyTorch's memory APIs
// with: the memory fraction as PyTorch reads it back, settings changed while blocks are live
// (torch.cuda.memory._set_allocator_settings), and the OOM report's private-pool and total figures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "alloc/caching_allocator.h"
#include "alloc/testing/fake_backend.h"

namespace memguard::alloc {
namespace {

using testing::FakeBackend;

constexpr size_t MiB = 1024 * 1024;
constexpr Stream kS1 = 0x11, kCap = 0xC0;

void expect_clean(FakeBackend& fake, CachingAllocator& alloc) {
    EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
    EXPECT_EQ(alloc.check_invariants(0), "");
}

TEST(AllocFraction, ReadsBackAsAllowedOverTotalAndOneMeansNoLimit) {
    FakeBackend fake(1, 1000 * MiB);
    CachingAllocator alloc(fake, 1);
    EXPECT_EQ(alloc.memory_fraction(0), 1.0);  // none set
    ASSERT_EQ(alloc.set_memory_fraction(0, 0.3), kSuccess);
    // PyTorch answers allowed / total: the bytes the limit became, over the total.
    const double allowed = static_cast<double>(static_cast<size_t>(0.3 * (1000.0 * MiB)));
    EXPECT_EQ(alloc.memory_fraction(0), allowed / (1000.0 * MiB));
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 400 * MiB, kS1, 0, &err, &oom), nullptr);
    EXPECT_TRUE(oom.over_limit);
    EXPECT_EQ(oom.limit_bytes, static_cast<size_t>(allowed));
    // 1.0 removes the limit (PyTorch's OOM message then names none).
    ASSERT_EQ(alloc.set_memory_fraction(0, 1.0), kSuccess);
    EXPECT_EQ(alloc.memory_fraction(0), 1.0);
    void* p = alloc.malloc(0, 400 * MiB, kS1, 0, &err, &oom);
    ASSERT_NE(p, nullptr);
    alloc.free(p);
    EXPECT_EQ(alloc.memory_fraction(5), 1.0);  // no such device
    expect_clean(fake, alloc);
}

TEST(AllocSettings, ApplyToLaterAllocationsAndKeepOversizeCountsBalanced) {
    FakeBackend fake(1, 4096 * MiB);
    CachingAllocator alloc(fake, 1);
    EXPECT_EQ(alloc.stats(0).max_split_size, -1);
    void* before = alloc.malloc(0, 50 * MiB, kS1);  // not oversize: no limit yet
    AllocatorConfig cfg = alloc.config();
    cfg.max_split_size = 40 * MiB;
    alloc.set_config(cfg);
    EXPECT_EQ(alloc.config().max_split_size, 40 * MiB);
    EXPECT_EQ(alloc.stats(0).max_split_size, int64_t(40 * MiB));
    void* after = alloc.malloc(0, 60 * MiB, kS1);
    EXPECT_EQ(alloc.stats(0).oversize_allocations.current, 1);
    EXPECT_EQ(alloc.stats(0).oversize_segments.current, 1);
    // Freeing the block made before the change does not count it out of the oversize ones.
    alloc.free(before);
    EXPECT_EQ(alloc.stats(0).oversize_allocations.current, 1);
    // A 4 MiB request no longer cuts into the cached 50 MiB block (now oversize).
    void* small = alloc.malloc(0, 4 * MiB, kS1);
    EXPECT_NE(small, before);
    alloc.free(after);
    EXPECT_EQ(alloc.stats(0).oversize_allocations.current, 0);
    // Back to no limit: the oversize segment made under the limit is still counted as one
    // when it is returned.
    cfg.max_split_size = SIZE_MAX;
    alloc.set_config(cfg);
    EXPECT_EQ(alloc.stats(0).max_split_size, -1);
    alloc.free(small);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(alloc.stats(0).oversize_segments.current, 0);
    EXPECT_EQ(alloc.stats(0).oversize_segments.freed, 1);
    EXPECT_EQ(alloc.stats(0).oversize_allocations.freed, 1);
    expect_clean(fake, alloc);
}

// garbage_collection_threshold, as PyTorch's: with a memory fraction set, a new segment past the
// threshold's share of it first frees the cached whole segments of the large pool that went
// unused longest (at least the average age), all of them in the round, not just enough.
TEST(AllocGarbageCollection, FreesTheOldestCachedSegmentsPastTheThreshold) {
    FakeBackend fake(1, 1000 * MiB);
    CachingAllocator alloc(fake, 1);
    AllocatorConfig cfg = alloc.config();
    cfg.garbage_collection_threshold = 0.5;
    alloc.set_config(cfg);
    ASSERT_EQ(alloc.set_memory_fraction(0, 0.5), kSuccess);  // 500 MiB; collected above 250
    void* a = alloc.malloc(0, 100 * MiB, kS1);
    void* b = alloc.malloc(0, 100 * MiB, kS1);
    void* c = alloc.malloc(0, 100 * MiB, kS1);
    ASSERT_TRUE(a && b && c);
    alloc.free(a);
    alloc.free(b);
    alloc.free(c);
    void* reused = alloc.malloc(0, 100 * MiB, kS1);  // one search, which finds a block: age 0
    ASSERT_NE(reused, nullptr);
    alloc.free(reused);
    EXPECT_EQ(fake.free_calls(), 0u);
    // No cached block fits 200 MiB; 300 MiB reserved is past 250: the two segments never used
    // again (age 5: every search so far, against an average of 11/3) go; the reused one (age 1:
    // one search since) stays.
    void* big = alloc.malloc(0, 200 * MiB, kS1);
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(fake.free_calls(), 2u);
    EXPECT_EQ(alloc.stats(0).reserved_bytes[0].current, int64_t(300 * MiB));
    EXPECT_EQ(alloc.stats(0).num_device_free, 2);
    EXPECT_EQ(alloc.malloc(0, 100 * MiB, kS1), reused);
    alloc.free(reused);
    alloc.free(big);
    expect_clean(fake, alloc);
}

TEST(AllocGarbageCollection, OnlyWithAFractionSetAndPastTheThreshold) {
    for (double fraction : {0.0, 0.9}) {  // 0.0: no fraction set
        FakeBackend fake(1, 1000 * MiB);
        CachingAllocator alloc(fake, 1);
        AllocatorConfig cfg = alloc.config();
        cfg.garbage_collection_threshold = 0.5;
        alloc.set_config(cfg);
        if (fraction > 0) {
            ASSERT_EQ(alloc.set_memory_fraction(0, fraction), kSuccess);  // collected above 450
        }
        void* a = alloc.malloc(0, 100 * MiB, kS1);
        void* b = alloc.malloc(0, 100 * MiB, kS1);
        alloc.free(a);
        alloc.free(b);
        void* big = alloc.malloc(0, 200 * MiB, kS1);  // 200 MiB reserved before: under either bound
        ASSERT_NE(big, nullptr);
        EXPECT_EQ(fake.free_calls(), 0u) << fraction;
        void* bigger = alloc.malloc(0, 300 * MiB, kS1);  // 400 reserved before: still under 450
        ASSERT_NE(bigger, nullptr);
        EXPECT_EQ(fake.free_calls(), 0u) << fraction;
        alloc.free(big);
        void* more = alloc.malloc(0, 250 * MiB, kS1);  // 700 reserved before: past 450 with a fraction
        EXPECT_EQ(fake.free_calls(), fraction > 0 ? 3u : 0u) << fraction;
        if (fraction > 0) {
            EXPECT_NE(more, nullptr);
        }
        alloc.free(more);
        alloc.free(bigger);
        expect_clean(fake, alloc);
    }
}

TEST(AllocSettings, RoundingChangesLive) {
    FakeBackend fake(1, 4096 * MiB);
    CachingAllocator alloc(fake, 1);
    AllocatorConfig cfg;
    cfg.roundup_power2_divisions = 4;
    alloc.set_config(cfg);
    void* p = alloc.malloc(0, 1100 * 1024, kS1);  // (1 MiB, 2 MiB] in steps of 256 KiB
    size_t n = 0;
    ASSERT_TRUE(alloc.block_sizes(p, &n, nullptr));
    EXPECT_EQ(n, 1280u * 1024);
    alloc.free(p);
    expect_clean(fake, alloc);
}

// PyTorch counts requested bytes with the active ones: a block freed while another stream still
// uses it keeps its requested bytes until its event completes (the native golden on an H200 shows
// requested > allocated after a record_stream'd free).
TEST(AllocStats, RequestedBytesStayUntilTheBlockIsBackInItsPool) {
    constexpr Stream kS2 = 0x22;
    FakeBackend fake(1, 1024 * MiB);
    CachingAllocator alloc(fake, 1);
    void* a = alloc.malloc(0, 3000, kS1);
    fake.submit(kS2);
    ASSERT_TRUE(alloc.record_stream(a, kS2));
    alloc.free(a);
    DeviceStats st = alloc.stats(0);
    EXPECT_EQ(st.allocated_bytes[kStatAll].current, 0);
    EXPECT_EQ(st.requested_bytes[kStatAll].current, 3000);
    EXPECT_EQ(st.requested_bytes[kStatAll].freed, 0);
    EXPECT_EQ(st.active_bytes[kStatAll].current, 3072);
    fake.complete(kS2);
    void* b = alloc.malloc(0, 512, kS1);  // processes the events
    st = alloc.stats(0);
    EXPECT_EQ(st.requested_bytes[kStatAll].current, 512);
    EXPECT_EQ(st.requested_bytes[kStatAll].freed, 3000);
    alloc.free(b);
    EXPECT_EQ(alloc.stats(0).requested_bytes[kStatAll].current, 0);
    expect_clean(fake, alloc);
}

TEST(AllocOomFigures, PrivatePoolCacheAndTheTotalLearnedBeforeACapture) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    ASSERT_EQ(alloc.set_memory_fraction(0, 1.0), kSuccess);  // asks the device: total learned
    const MempoolId pool{7, 0};
    ASSERT_TRUE(alloc.begin_allocate_to_pool(0, pool, [](Stream s) { return s == kCap; }));
    fake.begin_capture(kCap);
    void* a = alloc.malloc(0, 30 * MiB, kCap);
    ASSERT_NE(a, nullptr);
    alloc.free(a);  // cached in the private pool
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 90 * MiB, kCap, 0, &err, &oom), nullptr);
    EXPECT_TRUE(oom.capture_underway);
    EXPECT_EQ(oom.device_total, 100 * MiB);  // from before the capture, not asked during it
    EXPECT_EQ(oom.device_free, 0u);
    EXPECT_EQ(oom.private_pool_cached, 30 * MiB);
    EXPECT_EQ(oom.segment_size, 90 * MiB);
    fake.end_capture(kCap);
    ASSERT_TRUE(alloc.end_allocate_to_pool(0, pool));
    ASSERT_TRUE(alloc.release_pool(0, pool));
    EXPECT_TRUE(alloc.empty_cache());
    expect_clean(fake, alloc);
}

}  // namespace
}  // namespace memguard::alloc

// The caching allocator's rules, one test each, against the fake device backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "alloc/caching_allocator.h"
#include "alloc/testing/fake_backend.h"

namespace memguard::alloc {
namespace {

using testing::FakeBackend;

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;
constexpr Stream kS1 = 0x11, kS2 = 0x22, kS3 = 0x33, kCap = 0xC0;

uintptr_t u(void* p) { return reinterpret_cast<uintptr_t>(p); }

class AllocTest : public ::testing::Test {
protected:
    explicit AllocTest(size_t capacity = 1024 * MiB, AllocatorConfig cfg = {})
        : fake(2, capacity), alloc(fake, 2, cfg) {}

    void TearDown() override {
        EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
        EXPECT_EQ(alloc.check_invariants(0), "");
        EXPECT_EQ(alloc.check_invariants(1), "");
    }

    void* get(size_t size, Stream s = kS1, SiteId site = 0) {
        int err = -1;
        void* p = alloc.malloc(0, size, s, site, &err);
        EXPECT_EQ(err, kSuccess) << "size " << size;
        EXPECT_NE(p, nullptr);
        return p;
    }
    size_t block_size(void* p) {
        size_t n = 0;
        EXPECT_TRUE(alloc.block_sizes(p, &n, nullptr));
        return n;
    }
    int64_t stat(const char* key, int device = 0) {
        for (const auto& [k, v] : memory_stats_items(alloc.stats(device)))
            if (k == key) return v;
        ADD_FAILURE() << "no stat " << key;
        return -1;
    }
    // The capture protocol of torch.cuda.graph: announce the pool, then capture; end the
    // capture, then the pool.
    void begin_capture(MempoolId id, Stream s) {
        ASSERT_TRUE(alloc.begin_allocate_to_pool(0, id, [s](Stream x) { return x == s; }));
        fake.begin_capture(s);
    }
    void end_capture(MempoolId id, Stream s) {
        fake.end_capture(s);
        ASSERT_TRUE(alloc.end_allocate_to_pool(0, id));
    }

    FakeBackend fake;
    CachingAllocator alloc;
};

// --- sizes -----------------------------------------------------------------------------------

TEST_F(AllocTest, RoundsTo512AndKeepsRequestedSize) {
    void* a = get(1);
    void* b = get(513);
    size_t size = 0, req = 0;
    ASSERT_TRUE(alloc.block_sizes(a, &size, &req));
    EXPECT_EQ(size, 512u);
    EXPECT_EQ(req, 1u);
    EXPECT_EQ(block_size(b), 1024u);
    EXPECT_EQ(stat("requested_bytes.all.current"), 514);
    EXPECT_EQ(stat("allocated_bytes.all.current"), 1536);
    alloc.free(a);
    alloc.free(b);
}

TEST_F(AllocTest, SmallRequestsShareOneTwoMiBSegment) {
    void* a = get(1000);
    void* b = get(100 * KiB);
    EXPECT_EQ(fake.live_bytes(0), 2 * MiB);
    EXPECT_EQ(fake.malloc_calls(), 1u);
    EXPECT_EQ(u(b), u(a) + 1024);  // split off the same segment, right after a
    EXPECT_EQ(stat("reserved_bytes.small_pool.current"), int64_t(2 * MiB));
    EXPECT_EQ(stat("reserved_bytes.large_pool.current"), 0);
    alloc.free(a);
    alloc.free(b);
}

TEST_F(AllocTest, LargeSegmentSizes) {
    void* a = get(MiB + 1);  // 1..10 MiB: a 20 MiB segment
    EXPECT_EQ(fake.live_bytes(0), 20 * MiB);
    void* b = get(3 * MiB);  // fits in the rest of that segment
    EXPECT_EQ(fake.malloc_calls(), 1u);
    void* c = get(17 * MiB + 1);  // 10 MiB or more: rounded up to 2 MiB
    EXPECT_EQ(fake.live_bytes(0), 20 * MiB + 18 * MiB);
    EXPECT_EQ(stat("reserved_bytes.large_pool.current"), int64_t(38 * MiB));
    alloc.free(a);
    alloc.free(b);
    alloc.free(c);
}

TEST_F(AllocTest, LargeRemainderOfOneMiBOrLessIsNotSplit) {
    void* a = get(11 * MiB);  // 12 MiB segment: 1 MiB left, kept in the block
    EXPECT_EQ(block_size(a), 12 * MiB);
    void* b = get(9 * MiB);  // 20 MiB segment: 11 MiB left, split off
    EXPECT_EQ(block_size(b), 9 * MiB);
    EXPECT_EQ(stat("inactive_split.large_pool.current"), 1);
    EXPECT_EQ(stat("inactive_split_bytes.large_pool.current"), int64_t(11 * MiB));
    alloc.free(a);
    alloc.free(b);
}

TEST(AllocRounding, PowerOfTwoDivisions) {
    FakeBackend fake(1, 1024 * MiB);
    AllocatorConfig cfg;
    cfg.roundup_power2_divisions = 4;
    CachingAllocator alloc(fake, 1, cfg);
    void* a = alloc.malloc(0, 5 * MiB + 1, kS1);    // interval [4, 8) MiB in 1 MiB steps
    void* b = alloc.malloc(0, 100 * KiB + 3, kS1);  // small: plain 512-byte rounding
    size_t n = 0;
    ASSERT_TRUE(alloc.block_sizes(a, &n, nullptr));
    EXPECT_EQ(n, 6 * MiB);
    ASSERT_TRUE(alloc.block_sizes(b, &n, nullptr));
    EXPECT_EQ(n, 100 * KiB + 512);
    alloc.free(a);
    alloc.free(b);
    EXPECT_EQ(alloc.check_invariants(0), "");
}

// --- splitting, coalescing, best fit ---------------------------------------------------------

TEST_F(AllocTest, FreeNeighboursCoalesce) {
    void* a = get(512);
    void* b = get(512);
    void* c = get(512);
    EXPECT_EQ(stat("inactive_split.all.current"), 1);  // the rest of the segment
    alloc.free(a);
    alloc.free(b);  // merges with a
    EXPECT_EQ(stat("inactive_split.all.current"), 2);
    EXPECT_EQ(stat("inactive_split_bytes.all.current"), int64_t(2 * MiB - 512));
    void* d = get(1024);  // a and b as one block
    EXPECT_EQ(d, a);
    alloc.free(d);
    alloc.free(c);  // merges with both sides: one whole segment again
    EXPECT_EQ(stat("inactive_split.all.current"), 0);
    ASSERT_EQ(alloc.snapshot(0).size(), 1u);
    EXPECT_EQ(alloc.snapshot(0)[0].size, 2 * MiB);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 0u);
}

TEST_F(AllocTest, BestFitTakesTheSmallestBlockThatFits) {
    void* x = get(2 * MiB);
    void* s1 = get(2 * MiB);
    void* z = get(4 * MiB);
    void* s2 = get(2 * MiB);
    EXPECT_EQ(fake.malloc_calls(), 1u);  // one 20 MiB segment
    alloc.free(x);
    alloc.free(z);
    void* p = get(3 * MiB);
    EXPECT_EQ(p, z);  // 4 MiB block, not the 2 MiB one (too small) nor the 10 MiB rest
    void* q = get(2 * MiB);
    EXPECT_EQ(q, x);
    for (void* v : {s1, s2, p, q}) alloc.free(v);
}

TEST(AllocSplit, MaxSplitSizeKeepsLargeBlocksWhole) {
    FakeBackend fake(1, 4096 * MiB);
    AllocatorConfig cfg;
    cfg.max_split_size = 40 * MiB;
    CachingAllocator alloc(fake, 1, cfg);
    void* big = alloc.malloc(0, 50 * MiB, kS1);
    ASSERT_NE(big, nullptr);
    alloc.free(big);
    // A 4 MiB request does not cut into the cached 50 MiB block: it gets its own segment.
    void* small = alloc.malloc(0, 4 * MiB, kS1);
    EXPECT_NE(small, big);
    EXPECT_EQ(fake.malloc_calls(), 2u);
    // A 45 MiB request takes the 50 MiB block whole (within max_non_split_rounding_size).
    void* mid = alloc.malloc(0, 45 * MiB, kS1);
    EXPECT_EQ(mid, big);
    size_t n = 0;
    ASSERT_TRUE(alloc.block_sizes(mid, &n, nullptr));
    EXPECT_EQ(n, 50 * MiB);
    void* huge = alloc.malloc(0, 70 * MiB, kS1);
    alloc.free(huge);
    // 70 MiB is more than 20 MiB above 41 MiB: not used for it.
    void* other = alloc.malloc(0, 41 * MiB, kS1);
    EXPECT_NE(other, huge);
    ASSERT_TRUE(alloc.block_sizes(other, &n, nullptr));
    EXPECT_EQ(n, 42 * MiB);  // its own 2 MiB-rounded segment, unsplit
    EXPECT_EQ(alloc.stats(0).oversize_allocations.current, 2);
    EXPECT_EQ(alloc.stats(0).oversize_segments.current, 3);
    alloc.free(small);
    alloc.free(mid);
    alloc.free(other);
    EXPECT_EQ(alloc.check_invariants(0), "");
    EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
}

TEST(AllocSplit, OversizeCachedBlocksAreReturnedFirst) {
    FakeBackend fake(1, 120 * MiB);
    AllocatorConfig cfg;
    cfg.max_split_size = 40 * MiB;
    CachingAllocator alloc(fake, 1, cfg);
    void* a = alloc.malloc(0, 100 * MiB, kS1);
    alloc.free(a);  // cached, too large to serve 41 MiB
    void* keep = alloc.malloc(0, 512, kS1);
    void* b = alloc.malloc(0, 41 * MiB, kS1);  // needs a's memory back
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(alloc.stats(0).num_alloc_retries, 0);  // the oversize release sufficed
    EXPECT_EQ(alloc.stats(0).num_sync_all_streams, 0);
    EXPECT_EQ(fake.free_calls(), 1u);
    alloc.free(b);
    alloc.free(keep);
    EXPECT_EQ(alloc.check_invariants(0), "");
    EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
}

// --- streams ---------------------------------------------------------------------------------

TEST_F(AllocTest, FreedBlockIsReusedOnItsStreamAtOnceButNeverOnAnother) {
    void* a = get(4096, kS2);
    alloc.free(a);
    void* b = get(4096, kS1);  // streams on both sides of kS2 in the pool's order
    void* c = get(4096, kS3);
    EXPECT_NE(b, a);
    EXPECT_NE(c, a);
    EXPECT_EQ(fake.malloc_calls(), 3u);  // each stream its own segment
    void* d = get(4096, kS2);
    EXPECT_EQ(d, a);
    EXPECT_EQ(fake.event_records(), 0u);
    for (void* v : {b, c, d}) alloc.free(v);
}

TEST_F(AllocTest, RecordStreamDelaysReuseUntilTheEventCompletes) {
    void* a = get(4096, kS1);
    fake.submit(kS2);
    ASSERT_TRUE(alloc.record_stream(a, kS2));
    alloc.record_stream(a, kS1);  // the allocation stream itself: ignored
    alloc.free(a);
    EXPECT_EQ(fake.event_records(), 1u);
    EXPECT_EQ(stat("active.all.current"), 1);  // still active: waits for kS2
    EXPECT_EQ(stat("allocated_bytes.all.current"), 0);
    void* b = get(4096, kS1);
    EXPECT_NE(b, a);
    fake.complete(kS2);
    void* c = get(4096, kS1);
    EXPECT_EQ(c, a);
    alloc.free(b);
    alloc.free(c);
}

TEST_F(AllocTest, EventsCompleteInStreamOrderAndArePooled) {
    fake.set_auto_complete_after(3);
    void* a = get(4096, kS1);
    alloc.record_stream(a, kS2);
    fake.submit(kS2);
    alloc.free(a);
    void* b = get(4096, kS1);  // query 1: not yet
    EXPECT_NE(b, a);
    alloc.free(b);
    void* c = get(4096, kS1);  // query 2
    alloc.free(c);
    void* d = get(4096, kS1);  // query 3: done, a is back (merged with b's block)
    EXPECT_EQ(d, a);
    alloc.record_stream(d, kS3);
    fake.submit(kS3);
    alloc.free(d);
    fake.complete(kS3);
    void* e = get(4096, kS1);
    EXPECT_EQ(e, a);
    EXPECT_EQ(fake.events_created(), 1u);  // the first event was reused for the second free
    alloc.free(e);
}

TEST_F(AllocTest, AFailedEventWaitKeepsTheBlock) {
    constexpr int kErrorIllegalAddress = 700;
    void* a = get(4096, kS1);
    alloc.record_stream(a, kS2);
    fake.submit(kS2);
    alloc.free(a);
    fake.complete(kS2);
    fake.fail_next_event_waits(1, kErrorIllegalAddress);
    void* b = get(4096, kS1);  // the query failed: a is not known to be free
    EXPECT_NE(b, a);
    void* c = get(4096, kS1);
    EXPECT_EQ(c, a);
    alloc.free(b);
    alloc.free(c);
    // The same for the wait of the OOM path.
    fake.set_capacity(0, 4 * MiB);
    void* d = get(512 * 1024, kS1);
    alloc.record_stream(d, kS2);
    fake.submit(kS2);
    alloc.free(d);
    fake.fail_next_event_waits(100, kErrorIllegalAddress);  // queries and the synchronize
    int err = 0;
    EXPECT_EQ(alloc.malloc(0, 3 * MiB, kS2, 0, &err), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_EQ(fake.free_calls(), 0u);  // d's segment stays: it may still be in use
    EXPECT_EQ(stat("active.all.current"), 1);
    fake.fail_next_event_waits(0, 0);
}

TEST_F(AllocTest, NoEventIsQueriedOrRecordedDuringACapture) {
    const MempoolId pool{1, 0};
    void* a = get(4096, kS1);
    alloc.record_stream(a, kS2);
    fake.submit(kS2);
    void* pending = get(8192, kS1);
    alloc.record_stream(pending, kS3);
    fake.submit(kS3);
    alloc.free(pending);  // event recorded before the capture
    const uint64_t records = fake.event_records();
    const uint64_t queries = fake.event_queries();
    begin_capture(pool, kCap);
    alloc.free(a);             // deferred: no event now
    void* b = get(4096, kS1);  // no process_events during the capture
    void* g = get(4096, kCap);
    EXPECT_NE(b, a);
    EXPECT_EQ(fake.event_records(), records);
    EXPECT_EQ(fake.event_queries(), queries);
    end_capture(pool, kCap);
    void* c = get(4096, kS1);  // the deferred event is recorded now; kS2 not done
    EXPECT_EQ(fake.event_records(), records + 1);
    EXPECT_NE(c, a);
    fake.complete(kS2);
    void* d = get(4096, kS1);
    EXPECT_EQ(d, a);
    for (void* v : {b, c, d, g}) alloc.free(v);
    alloc.release_pool(0, pool);
}

TEST_F(AllocTest, UsesOnACapturingStreamGetNoEvent) {
    const MempoolId pool{2, 0};
    begin_capture(pool, kCap);
    void* a = get(4096, kCap);
    void* x = get(4096, kS1);
    alloc.record_stream(x, kCap);  // captured work: runs at replay, not now
    alloc.free(x);
    end_capture(pool, kCap);
    const uint64_t records = fake.event_records();
    void* y = get(4096, kS1);
    EXPECT_EQ(fake.event_records(), records);
    EXPECT_EQ(y, x);
    alloc.free(a);
    alloc.free(y);
    alloc.release_pool(0, pool);
}

// --- empty_cache, memory fraction, OOM path ----------------------------------------------------

TEST_F(AllocTest, EmptyCacheReturnsOnlyWhollyFreeSegments) {
    void* a = get(512);      // small segment, stays partly used
    void* b = get(5 * MiB);  // large segment, freed
    void* c = get(600 * KiB);
    alloc.free(b);
    alloc.free(c);
    EXPECT_EQ(fake.live_segments(0), 2u);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 1u);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(2 * MiB));
    EXPECT_EQ(stat("num_device_free"), 1);
    alloc.free(a);
}

TEST_F(AllocTest, EmptyCacheDuringACaptureFreesNothing) {
    void* a = get(5 * MiB);
    alloc.free(a);
    begin_capture({3, 0}, kCap);
    EXPECT_FALSE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 1u);
    end_capture({3, 0}, kCap);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 0u);
    alloc.release_pool(0, {3, 0});
}

TEST_F(AllocTest, EmptyCacheAlsoWaitsOutUnannouncedCaptures) {
    void* a = get(5 * MiB);
    alloc.free(a);
    fake.begin_capture(kCap);  // a capture the allocator was not told of
    EXPECT_FALSE(alloc.empty_cache());
    fake.end_capture(kCap);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 0u);
}

TEST_F(AllocTest, MemoryFractionLimitsReservedMemory) {
    ASSERT_EQ(alloc.set_memory_fraction(0, 0.5), kSuccess);
    void* a = get(400 * MiB);
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 200 * MiB, kS1, 0, &err, &oom), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_TRUE(oom.over_limit);
    EXPECT_EQ(oom.limit_bytes, 512 * MiB);
    EXPECT_EQ(fake.malloc_calls(), 1u);  // refused without asking the device
    void* b = get(100 * MiB);
    alloc.free(a);
    alloc.free(b);
    EXPECT_EQ(alloc.set_memory_fraction(0, 1.5), 1);
}

TEST(AllocOom, CachedBlocksAreFreedAndTheAllocationRetried) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    void* a = alloc.malloc(0, 60 * MiB, kS1);
    alloc.record_stream(a, kS3);
    fake.submit(kS3);  // never completed by the test: the retry synchronizes the event
    alloc.free(a);
    void* b = alloc.malloc(0, 60 * MiB, kS2);  // a's segment is cached for kS1 only
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(alloc.stats(0).num_alloc_retries, 1);
    EXPECT_EQ(alloc.stats(0).num_sync_all_streams, 1);
    EXPECT_EQ(alloc.stats(0).num_device_free, 1);
    EXPECT_EQ(alloc.stats(0).num_ooms, 0);
    alloc.free(b);
    EXPECT_EQ(alloc.check_invariants(0), "");
    EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
}

TEST(AllocOom, RescueRunsWithoutTheLockAndTheAllocationIsRetried) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    void* garbage = alloc.malloc(0, 60 * MiB, kS1);  // held by a reference cycle, say
    int calls = 0;
    alloc.set_oom_rescue([&](const OomRescueInfo& info) {
        ++calls;
        EXPECT_EQ(info.size, 60 * MiB);
        EXPECT_FALSE(info.capture_underway);
        // Another thread must be able to use the allocator while the rescue runs.
        std::thread t([&] { (void)alloc.stats(0); });
        t.join();
        return alloc.free(garbage);
    });
    void* b = alloc.malloc(0, 60 * MiB, kS2);
    EXPECT_NE(b, nullptr);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(alloc.stats(0).num_ooms, 0);
    alloc.free(b);
    EXPECT_EQ(alloc.check_invariants(0), "");
}

TEST(AllocOom, FailureListsLiveBlocksBySite) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    void* a = alloc.malloc(0, 30 * MiB, kS1, 7);
    void* b = alloc.malloc(0, 30 * MiB, kS1, 7);
    void* c = alloc.malloc(0, 512, kS1, 9);
    int calls = 0;
    alloc.set_oom_rescue([&](const OomRescueInfo&) {
        ++calls;
        return true;  // frees nothing: the allocation is tried once more, then fails
    });
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 50 * MiB, kS1, 3, &err, &oom), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(oom.rescue_called);
    EXPECT_FALSE(oom.over_limit);
    EXPECT_EQ(oom.requested, 50 * MiB);
    EXPECT_EQ(oom.segment_size, 50 * MiB);
    EXPECT_EQ(oom.device_total, 100 * MiB);
    ASSERT_EQ(oom.live_by_site.size(), 2u);
    EXPECT_EQ(oom.live_by_site[0].site, 7u);
    EXPECT_EQ(oom.live_by_site[0].bytes, 60 * MiB);
    EXPECT_EQ(oom.live_by_site[0].blocks, 2u);
    EXPECT_EQ(oom.live_by_site[1].site, 9u);
    EXPECT_EQ(oom.live_by_site[1].bytes, 512u);
    const DeviceStats st = alloc.stats(0);
    EXPECT_EQ(st.num_ooms, 1);
    EXPECT_EQ(st.num_alloc_retries, 2);  // before and after the rescue
    for (void* v : {a, b, c}) alloc.free(v);
    EXPECT_EQ(alloc.check_invariants(0), "");
}

TEST(AllocOom, RescueThatFreedNothingIsNotRetried) {
    FakeBackend fake(1, 10 * MiB);
    CachingAllocator alloc(fake, 1);
    alloc.set_oom_rescue([](const OomRescueInfo&) { return false; });
    int attempts = 0;
    fake.set_malloc_hook([&] { ++attempts; });
    int err = 0;
    EXPECT_EQ(alloc.malloc(0, 50 * MiB, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_EQ(attempts, 2);  // once, and once after freeing the cache
    EXPECT_EQ(alloc.stats(0).num_ooms, 1);
}

TEST(AllocOom, HugeRequestsFailInsteadOfWrappingAround) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, SIZE_MAX, kS1, 0, &err, &oom), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_EQ(oom.requested, SIZE_MAX);
    EXPECT_EQ(alloc.malloc(0, SIZE_MAX - 4096, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_EQ(alloc.stats(0).num_ooms, 2);
    EXPECT_EQ(alloc.stats(0).allocation[kStatAll].current, 0);
}

TEST(AllocOom, ARescueThatThrowsCountsAsFreeingNothing) {
    FakeBackend fake(1, 10 * MiB);
    CachingAllocator alloc(fake, 1);
    alloc.set_oom_rescue([](const OomRescueInfo&) -> bool { throw std::runtime_error("from the bridge"); });
    int err = 0;
    EXPECT_EQ(alloc.malloc(0, 50 * MiB, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    void* p = alloc.malloc(0, 4096, kS1, 0, &err);  // the lock was taken back
    EXPECT_NE(p, nullptr);
    alloc.free(p);
}

TEST(AllocOom, OtherDeviceErrorsAreReturnedWithoutRetry) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    int rescues = 0;
    alloc.set_oom_rescue([&](const OomRescueInfo&) { return ++rescues > 0; });
    fake.fail_next_mallocs(1, 999);
    int err = 0;
    EXPECT_EQ(alloc.malloc(0, 4096, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, 999);
    EXPECT_EQ(rescues, 0);
    EXPECT_EQ(alloc.stats(0).num_ooms, 0);
    EXPECT_EQ(alloc.stats(0).num_alloc_retries, 0);
    void* p = alloc.malloc(0, 4096, kS1, 0, &err);
    EXPECT_NE(p, nullptr);
    alloc.free(p);
}

TEST_F(AllocTest, NoSegmentIsFreedDuringACaptureEvenOnOom) {
    fake.set_capacity(0, 100 * MiB);
    void* a = get(60 * MiB, kS1);
    alloc.free(a);  // cached for kS1
    const MempoolId pool{4, 0};
    begin_capture(pool, kCap);
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 60 * MiB, kCap, 0, &err, &oom), nullptr);
    EXPECT_EQ(err, kErrorMemoryAllocation);
    EXPECT_TRUE(oom.capture_underway);
    EXPECT_EQ(oom.device_total, 0u);  // cudaMemGetInfo not asked during the capture
    EXPECT_EQ(fake.free_calls(), 0u);
    EXPECT_EQ(alloc.stats(0).num_alloc_retries, 0);  // no retry was possible
    end_capture(pool, kCap);
    void* b = get(60 * MiB, kS2);  // now the cache is freed
    EXPECT_EQ(fake.free_calls(), 1u);
    alloc.free(b);
    alloc.release_pool(0, pool);
}

// --- private pools -----------------------------------------------------------------------------

TEST_F(AllocTest, CaptureAllocationsComeFromThePrivatePool) {
    const MempoolId pool{5, 0};
    void* outside_before = get(4096, kCap);  // same stream, before the capture: default pool
    alloc.free(outside_before);
    begin_capture(pool, kCap);
    void* g = get(4096, kCap);
    EXPECT_NE(g, outside_before);                                       // a new segment, in the pool
    EXPECT_EQ(FakeBackend::thread_capture_mode(), kCaptureModeGlobal);  // restored after malloc
    void* other = get(4096, kS1);                                       // the filter does not match: default pool
    alloc.free(g);                                                      // back to the pool during the capture
    void* g2 = get(4096, kCap);
    EXPECT_EQ(g2, g);
    end_capture(pool, kCap);
    void* after = get(4096, kCap);  // after the capture: the default pool again
    EXPECT_EQ(after, outside_before);
    alloc.free(g2);
    void* after2 = get(4096, kCap);  // g2's block stays the pool's
    EXPECT_NE(after2, g2);
    std::map<uintptr_t, MempoolId> pools;
    for (const BlockInfo& b : alloc.snapshot(0)) pools[b.ptr] = b.pool;
    EXPECT_EQ(pools[u(g2)], pool);
    EXPECT_EQ(pools[u(after)], MempoolId{});
    for (void* v : {other, after, after2}) alloc.free(v);
    EXPECT_TRUE(alloc.release_pool(0, pool));
}

TEST_F(AllocTest, MallocTellsWhichPoolTheBlockCameFromAndItsSizes) {
    const MempoolId pool{9, 0};
    AllocatedBlock got;
    got.pool = {1, 1};
    int err = -1;
    void* outside = alloc.malloc(0, 4000, kCap, 0, &err, nullptr, &got);
    EXPECT_EQ(got.pool, MempoolId{});  // the default pools
    size_t size = 0, requested = 0;
    ASSERT_TRUE(alloc.block_sizes(outside, &size, &requested));
    EXPECT_EQ(got.size, size);
    EXPECT_EQ(got.requested, 4000u);
    EXPECT_EQ(requested, 4000u);
    begin_capture(pool, kCap);
    void* inside = alloc.malloc(0, 4096, kCap, 0, &err, nullptr, &got);
    EXPECT_EQ(got.pool, pool);
    void* other = alloc.malloc(0, 3 * MiB + 5, kS1, 0, &err, nullptr, &got);  // the filter does not match
    EXPECT_EQ(got.pool, MempoolId{});
    ASSERT_TRUE(alloc.block_sizes(other, &size, nullptr));
    EXPECT_EQ(got.size, size);
    EXPECT_GT(got.size, 3 * MiB + 5);
    EXPECT_EQ(got.requested, 3 * MiB + 5);
    end_capture(pool, kCap);
    for (void* v : {outside, inside, other}) alloc.free(v);
    alloc.release_pool(0, pool);
}

TEST_F(AllocTest, FreeCallsBeforeReuseOnceForALiveBlockOnly) {
    void* p = get(4096, kCap);
    int calls = 0;
    // While before_reuse runs, the block cannot be handed out: a malloc of the same size on the
    // same stream from another thread waits until the free is complete, then gets the block.
    std::atomic<bool> started{false}, done{false};
    void* q = nullptr;
    std::thread other;
    EXPECT_TRUE(alloc.free(p, [&] {
        ++calls;
        other = std::thread([&] {
            started = true;
            q = get(4096, kCap);
            done = true;
        });
        while (!started) std::this_thread::yield();
        // Give the other thread 300 ms to finish its malloc: it must not, since the block is not
        // free yet (on a loaded machine it may not even have started it: then this proves less).
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        while (!done && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        EXPECT_FALSE(done.load()) << "a malloc completed while the block's free was being recorded";
    }));
    other.join();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(q, p);  // afterwards the block is reused
    alloc.free(q);
    EXPECT_FALSE(alloc.free(p, [&] { ++calls; }));  // a second free: not live, not called
    int x = 0;
    EXPECT_FALSE(alloc.free(&x, [&] { ++calls; }));
    EXPECT_EQ(calls, 1);
}

// PyTorch's free names the block's device; a wrong or missing hint still finds the block.
TEST(AllocDevices, FreeFindsTheBlockOnAnyDeviceWhateverTheHint) {
    FakeBackend fake(3, 64 * MiB);
    CachingAllocator alloc(fake, 3);
    int err = 0;
    void* on[3];
    for (int d = 0; d < 3; ++d) {
        on[d] = alloc.malloc(d, 4096, 0, 0, &err);
        ASSERT_NE(on[d], nullptr);
    }
    int calls = 0;
    EXPECT_TRUE(alloc.free(
        on[2], [&] { ++calls; }, 2));  // the right device
    EXPECT_TRUE(alloc.free(
        on[1], [&] { ++calls; }, 0));                  // a wrong one
    EXPECT_TRUE(alloc.free(on[0], [&] { ++calls; }));  // none
    EXPECT_EQ(calls, 3);
    EXPECT_FALSE(alloc.free(
        on[0], [&] { ++calls; }, 7));  // not live; out-of-range hint
    EXPECT_EQ(calls, 3);
    for (int d = 0; d < 3; ++d) {
        EXPECT_EQ(alloc.stats(d).allocated_bytes[kStatAll].current, 0) << "device " << d;
        EXPECT_EQ(alloc.check_invariants(d), "") << "device " << d;
    }
}

TEST_F(AllocTest, NewestMatchingPoolWins) {
    begin_capture({6, 0}, kCap);
    ASSERT_TRUE(alloc.begin_allocate_to_pool(0, {0, 7}, [](Stream) { return true; }));
    void* a = get(4096, kCap);
    ASSERT_TRUE(alloc.end_allocate_to_pool(0, {0, 7}));
    void* b = get(4096, kCap);
    end_capture({6, 0}, kCap);
    std::map<uintptr_t, MempoolId> pools;
    for (const BlockInfo& i : alloc.snapshot(0)) pools[i.ptr] = i.pool;
    EXPECT_EQ(pools[u(a)], (MempoolId{0, 7}));
    EXPECT_EQ(pools[u(b)], (MempoolId{6, 0}));
    alloc.free(a);
    alloc.free(b);
    alloc.release_pool(0, {6, 0});
    alloc.release_pool(0, {0, 7});
}

TEST_F(AllocTest, SharedPoolIsReusedByTheNextCaptureAndCounted) {
    const MempoolId pool{0, 8};  // graph_pool_handle()
    begin_capture(pool, kCap);
    void* out = get(4096, kCap);  // graph 1's output, alive after its capture
    end_capture(pool, kCap);
    alloc.free(out);            // freed between the captures: stays in the shared pool
    begin_capture(pool, kCap);  // graph 2 with pool=graph 1's pool
    void* in2 = get(4096, kCap);
    EXPECT_EQ(in2, out);
    end_capture(pool, kCap);
    alloc.free(in2);
    EXPECT_EQ(fake.malloc_calls(), 1u);
    EXPECT_TRUE(alloc.release_pool(0, pool));  // graph 1 reset: graph 2 still uses it
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 1u);
    EXPECT_TRUE(alloc.release_pool(0, pool));   // graph 2 reset
    EXPECT_FALSE(alloc.release_pool(0, pool));  // no uses left
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 0u);
}

TEST_F(AllocTest, ReleasedPoolReturnsMemoryOnlyOnceItsBlocksAreFree) {
    const MempoolId pool{9, 0};
    begin_capture(pool, kCap);
    void* live = get(5 * MiB, kCap);
    void* dead = get(600 * KiB, kCap);
    end_capture(pool, kCap);
    alloc.free(dead);
    alloc.release_pool(0, pool);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 1u);  // the small one went, the large one holds `live`
    void* reuse = get(5 * MiB, kCap);      // no capture now: from the default pool
    EXPECT_EQ(fake.live_segments(0), 2u);
    alloc.free(live);
    EXPECT_TRUE(alloc.empty_cache());
    EXPECT_EQ(fake.live_segments(0), 1u);  // only `reuse`'s segment
    alloc.free(reuse);
}

TEST(AllocPools, ReleasedPoolMemoryReturnsOnTheOomPath) {
    FakeBackend fake(1, 100 * MiB);
    CachingAllocator alloc(fake, 1);
    const MempoolId pool{10, 0};
    ASSERT_TRUE(alloc.begin_allocate_to_pool(0, pool, [](Stream s) { return s == kCap; }));
    fake.begin_capture(kCap);
    void* g = alloc.malloc(0, 60 * MiB, kCap);
    ASSERT_NE(g, nullptr);
    fake.end_capture(kCap);
    alloc.end_allocate_to_pool(0, pool);
    alloc.free(g);
    void* blocked = alloc.malloc(0, 60 * MiB, kS1);
    EXPECT_EQ(blocked, nullptr);  // the pool is still in use: its memory stays
    alloc.release_pool(0, pool);
    void* ok = alloc.malloc(0, 60 * MiB, kS1);
    EXPECT_NE(ok, nullptr);
    alloc.free(ok);
    EXPECT_EQ(alloc.check_invariants(0), "");
    EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
}

TEST_F(AllocTest, EndingACaptureEndsTheCallingThreadsOneInASharedPool) {
    // Found by the stress test: two threads capture into one shared pool at once, each with its
    // own stream filter; the id alone does not say whose capture ends.
    const MempoolId pool{0, 11};
    ASSERT_TRUE(alloc.begin_allocate_to_pool(0, pool, [](Stream s) { return s == kCap; }));
    std::thread other([&] { alloc.begin_allocate_to_pool(0, pool, [](Stream s) { return s == kS3; }); });
    other.join();
    ASSERT_TRUE(alloc.end_allocate_to_pool(0, pool));  // this thread's capture (kCap)
    void* in_other = get(4096, kS3);
    void* mine = get(4096, kCap);
    std::map<uintptr_t, MempoolId> pools;
    for (const BlockInfo& i : alloc.snapshot(0)) pools[i.ptr] = i.pool;
    EXPECT_EQ(pools[u(in_other)], pool);  // the other thread's capture still routes
    EXPECT_EQ(pools[u(mine)], MempoolId{});
    ASSERT_TRUE(alloc.end_allocate_to_pool(0, pool));  // no entry of this thread: the other one
    EXPECT_FALSE(alloc.end_allocate_to_pool(0, pool));
    alloc.free(in_other);
    alloc.free(mine);
    alloc.release_pool(0, pool);
    alloc.release_pool(0, pool);
}

TEST_F(AllocTest, ZeroIdIsNotAPool) {
    EXPECT_FALSE(alloc.begin_allocate_to_pool(0, {}, [](Stream) { return true; }));
    EXPECT_FALSE(alloc.end_allocate_to_pool(0, {1, 1}));
    EXPECT_FALSE(alloc.release_pool(0, {1, 1}));
}

// --- stats, misc ---------------------------------------------------------------------------------

TEST_F(AllocTest, StatsUsePyTorchKeysAndResetPeak) {
    void* a = get(3 * MiB);
    void* b = get(1000);
    alloc.free(a);
    EXPECT_EQ(stat("allocated_bytes.all.current"), 1024);
    EXPECT_EQ(stat("allocated_bytes.all.peak"), int64_t(3 * MiB + 1024));
    EXPECT_EQ(stat("allocated_bytes.large_pool.allocated"), int64_t(3 * MiB));
    EXPECT_EQ(stat("allocated_bytes.large_pool.freed"), int64_t(3 * MiB));
    EXPECT_EQ(stat("allocation.all.current"), 1);
    EXPECT_EQ(stat("active_bytes.all.current"), 1024);
    EXPECT_EQ(stat("reserved_bytes.all.current"), int64_t(22 * MiB));
    EXPECT_EQ(stat("segment.all.current"), 2);
    EXPECT_EQ(stat("num_device_alloc"), 2);
    EXPECT_EQ(stat("num_device_free"), 0);
    EXPECT_EQ(stat("num_ooms"), 0);
    EXPECT_EQ(stat("num_alloc_retries"), 0);
    EXPECT_EQ(stat("max_split_size"), -1);
    alloc.reset_peak_stats(0);
    EXPECT_EQ(stat("allocated_bytes.all.peak"), 1024);
    EXPECT_EQ(stat("reserved_bytes.all.peak"), int64_t(22 * MiB));
    alloc.reset_accumulated_stats(0);
    EXPECT_EQ(stat("allocated_bytes.large_pool.allocated"), 0);
    EXPECT_EQ(stat("num_device_alloc"), 0);
    alloc.free(b);
}

TEST_F(AllocTest, UnknownPointersAreRefused) {
    int x = 0;
    EXPECT_FALSE(alloc.free(&x));
    void* a = get(4096);
    EXPECT_TRUE(alloc.free(a));
    EXPECT_FALSE(alloc.free(a));
    EXPECT_FALSE(alloc.record_stream(a, kS2));
    int err = -1;
    EXPECT_EQ(alloc.malloc(0, 0, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, kSuccess);
    EXPECT_EQ(alloc.malloc(5, 4096, kS1, 0, &err), nullptr);
    EXPECT_EQ(err, 101);
}

TEST_F(AllocTest, DevicesAreSeparate) {
    void* a = get(4096);
    int err = 0;
    void* b = alloc.malloc(1, 4096, kS1, 0, &err);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(fake.live_segments(0), 1u);
    EXPECT_EQ(fake.live_segments(1), 1u);
    EXPECT_EQ(alloc.stats(1).allocation[kStatAll].current, 1);
    EXPECT_TRUE(alloc.free(b));  // no device named: found on device 1
    EXPECT_EQ(alloc.stats(1).allocation[kStatAll].current, 0);
    EXPECT_EQ(alloc.stats(0).allocation[kStatAll].current, 1);
    alloc.free(a);
}

}  // namespace
}  // namespace memguard::alloc

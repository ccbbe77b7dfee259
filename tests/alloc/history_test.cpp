// The memory history and the snapshot of the allocator core (alloc/history.h), against the fake
// device backend.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "alloc/caching_allocator.h"
#include "alloc/history.h"
#include "alloc/testing/fake_backend.h"

namespace memguard::alloc {
namespace {

using testing::FakeBackend;

constexpr size_t MiB = 1024 * 1024;
constexpr Stream kS1 = 0x11, kS2 = 0x22;

uintptr_t u(void* p) { return reinterpret_cast<uintptr_t>(p); }

class HistoryTest : public ::testing::Test {
protected:
    HistoryTest() : fake(1, 64 * MiB), alloc(fake, 1) {}
    void TearDown() override {
        EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
        EXPECT_EQ(alloc.check_invariants(0), "");
    }
    void* get(size_t size, SiteId site, Stream s = kS1) {
        int err = -1;
        void* p = alloc.malloc(0, size, s, site, &err);
        EXPECT_EQ(err, kSuccess);
        return p;
    }
    void record(ContextLevel context, size_t max_entries = 1000, uint32_t skip = 0) {
        HistoryConfig c;
        c.enabled = true;
        c.context = context;
        c.max_entries = max_entries;
        c.skip_mask = skip;
        alloc.set_history(c);
    }
    static std::vector<std::string> actions(const DeviceSnapshot& s) {
        std::vector<std::string> out;
        for (const TraceEntry& e : s.trace) out.push_back(trace_action_name(e.action));
        return out;
    }

    FakeBackend fake;
    CachingAllocator alloc;
};

TEST_F(HistoryTest, OffRecordsNothingAndBlocksHaveNoContext) {
    void* p = get(1000, 7);
    DeviceSnapshot s = alloc.take_snapshot(0);
    EXPECT_TRUE(s.trace.empty());
    ASSERT_EQ(s.segments.size(), 1u);
    EXPECT_FALSE(s.segments[0].has_context);
    EXPECT_FALSE(s.segments[0].blocks[0].has_context);
    EXPECT_EQ(s.segments[0].blocks[0].site, 0u);
    alloc.free(p);
}

TEST_F(HistoryTest, SegmentsAndBlocksAsPyTorchCountsThem) {
    void* small = get(1000, 1);
    void* large = get(3 * MiB, 2);
    DeviceSnapshot s = alloc.take_snapshot(0);
    ASSERT_EQ(s.segments.size(), 2u);
    const SnapshotSegment* seg_small = s.segments[0].large ? &s.segments[1] : &s.segments[0];
    const SnapshotSegment* seg_large = s.segments[0].large ? &s.segments[0] : &s.segments[1];
    EXPECT_LT(s.segments[0].address, s.segments[1].address);  // by address
    EXPECT_EQ(seg_small->total_size, 2 * MiB);
    EXPECT_EQ(seg_small->allocated_size, 1024u);
    EXPECT_EQ(seg_small->active_size, 1024u);
    EXPECT_EQ(seg_small->requested_size, 1000u);
    EXPECT_EQ(seg_small->stream, kS1);
    ASSERT_EQ(seg_small->blocks.size(), 2u);  // the block and the rest of the segment
    EXPECT_EQ(seg_small->blocks[0].address, u(small));
    EXPECT_EQ(seg_small->blocks[0].state, BlockInfo::State::Allocated);
    EXPECT_EQ(seg_small->blocks[1].state, BlockInfo::State::Free);
    EXPECT_EQ(seg_small->blocks[1].address, u(small) + 1024);
    EXPECT_EQ(seg_large->total_size, 20 * MiB);
    EXPECT_EQ(seg_large->blocks[0].address, u(large));
    EXPECT_EQ(seg_large->blocks[0].size, 3 * MiB);
    alloc.free(small);
    alloc.free(large);
}

TEST_F(HistoryTest, TraceFollowsPyTorchsActionsWithSites) {
    record(ContextLevel::All);
    void* p = get(1000, 5);
    alloc.free(
        p, [] {}, -1, 9);  // the free's own site
    void* q = get(2000, 6);
    alloc.free(q);  // no free site: the allocation's
    ASSERT_TRUE(alloc.empty_cache());
    DeviceSnapshot s = alloc.take_snapshot(0);
    EXPECT_EQ(actions(s),
              (std::vector<std::string>{"segment_alloc", "alloc", "free_requested", "free_completed", "alloc",
                                        "free_requested", "free_completed", "segment_free", "snapshot"}));
    EXPECT_EQ(s.trace[0].size, 2 * MiB);
    EXPECT_EQ(s.trace[0].site, 5u);  // the segment was made for allocation 5
    EXPECT_EQ(s.trace[1].addr, u(p));
    EXPECT_EQ(s.trace[1].size, 1000u);  // the request
    EXPECT_EQ(s.trace[1].stream, kS1);
    EXPECT_EQ(s.trace[2].site, 9u);
    EXPECT_EQ(s.trace[2].size, 1000u);
    EXPECT_EQ(s.trace[3].site, 9u);
    EXPECT_EQ(s.trace[5].site, 6u);
    EXPECT_EQ(s.trace[5].size, 2000u);
    EXPECT_EQ(s.trace[8].size, 0u);                                              // nothing active
    for (const TraceEntry& e : s.trace) EXPECT_GT(e.time_us, 1600000000000000);  // after 2020
    for (size_t i = 1; i < s.trace.size(); ++i) EXPECT_GE(s.trace[i].time_us, s.trace[i - 1].time_us);
}

TEST_F(HistoryTest, ContextLevels) {
    record(ContextLevel::State);
    void* p = get(1000, 5);
    alloc.free(
        p, [] {}, -1, 9);
    void* keep = get(1000, 8);
    DeviceSnapshot s = alloc.take_snapshot(0);
    for (const TraceEntry& e : s.trace) {
        if (e.action == TraceAction::Alloc) {
            EXPECT_FALSE(e.has_context);
        }
        // The free falls back to the allocation's stacks, kept at State.
        if (e.action == TraceAction::FreeRequested) {
            EXPECT_EQ(e.site, 5u);
        }
    }
    EXPECT_TRUE(s.segments[0].blocks[0].has_context);
    EXPECT_EQ(s.segments[0].blocks[0].site, 8u);
    record(ContextLevel::Alloc);
    alloc.free(
        keep, [] {}, -1, 9);
    s = alloc.take_snapshot(0);
    ASSERT_GE(s.trace.size(), 2u);
    EXPECT_EQ(s.trace[s.trace.size() - 3].action, TraceAction::FreeRequested);
    EXPECT_EQ(s.trace[s.trace.size() - 3].site, 8u);  // below All: not the free's own
}

TEST_F(HistoryTest, RingKeepsTheNewestMaxEntries) {
    record(ContextLevel::All, 4);
    std::vector<void*> ps;
    for (SiteId i = 1; i <= 6; ++i) ps.push_back(get(1000, i));
    DeviceSnapshot s = alloc.take_snapshot(0);
    ASSERT_EQ(s.trace.size(), 4u);
    EXPECT_EQ(actions(s), (std::vector<std::string>{"alloc", "alloc", "alloc", "snapshot"}));
    EXPECT_EQ(s.trace[0].site, 4u);
    EXPECT_EQ(s.trace[2].site, 6u);
    // A smaller ring keeps the newest; disabling drops everything.
    record(ContextLevel::All, 2);
    s = alloc.take_snapshot(0);
    EXPECT_EQ(actions(s), (std::vector<std::string>{"snapshot", "snapshot"}));
    alloc.set_history(HistoryConfig{});
    s = alloc.take_snapshot(0);
    EXPECT_TRUE(s.trace.empty());
    for (void* p : ps) alloc.free(p);
}

// torch.cuda.memory._set_memory_metadata: the entries recorded while a text is set carry it;
// the text is kept per device whether or not history records, and "" clears it.
TEST_F(HistoryTest, UserMetadataTagsTheEntriesRecordedWhileSet) {
    alloc.set_user_metadata(0, "before history");
    EXPECT_EQ(alloc.user_metadata(0), "before history");
    record(ContextLevel::All);
    void* p = get(1000, 1);
    alloc.set_user_metadata(0, "step 3");
    alloc.free(p);
    alloc.set_user_metadata(0, "");
    EXPECT_EQ(alloc.user_metadata(0), "");
    EXPECT_EQ(alloc.user_metadata(7), "");  // no such device
    alloc.set_user_metadata(7, "ignored");
    DeviceSnapshot s = alloc.take_snapshot(0);
    std::vector<std::string> tags;
    for (const TraceEntry& e : s.trace) tags.push_back(e.user_metadata ? *e.user_metadata : "");
    EXPECT_EQ(actions(s),
              (std::vector<std::string>{"segment_alloc", "alloc", "free_requested", "free_completed", "snapshot"}));
    EXPECT_EQ(tags, (std::vector<std::string>{"before history", "before history", "step 3", "step 3", ""}));
}

TEST_F(HistoryTest, SkippedActionsAndClear) {
    record(ContextLevel::All, 100, 1u << static_cast<unsigned>(TraceAction::FreeRequested));
    alloc.free(get(1000, 1));
    DeviceSnapshot s = alloc.take_snapshot(0, {}, true);
    EXPECT_EQ(actions(s), (std::vector<std::string>{"segment_alloc", "alloc", "free_completed", "snapshot"}));
    HistoryConfig c;
    c.enabled = true;
    c.context = ContextLevel::All;
    c.max_entries = 100;
    c.clear = true;
    alloc.set_history(c);
    s = alloc.take_snapshot(0, {}, true);
    EXPECT_EQ(actions(s), (std::vector<std::string>{"snapshot"}));
    s = alloc.take_snapshot(0, {}, false);
    EXPECT_TRUE(s.trace.empty());
}

TEST_F(HistoryTest, PendingFreeIsActiveUntilItsStreamCompletes) {
    record(ContextLevel::All);
    void* p = get(4096, 3);
    ASSERT_TRUE(alloc.record_stream(p, kS2));
    fake.submit(kS2);
    alloc.free(p);
    DeviceSnapshot s = alloc.take_snapshot(0);
    EXPECT_EQ(s.segments[0].blocks[0].state, BlockInfo::State::Pending);
    EXPECT_EQ(s.segments[0].active_size, 4096u);
    EXPECT_EQ(s.segments[0].allocated_size, 0u);
    EXPECT_EQ(s.segments[0].requested_size, 4096u);
    EXPECT_EQ(actions(s).back(), "snapshot");
    EXPECT_EQ(actions(s)[actions(s).size() - 2], "free_requested");
    fake.complete(kS2);
    void* q = get(100, 4);  // processes the events
    s = alloc.take_snapshot(0);
    bool completed = false;
    for (const TraceEntry& e : s.trace) {
        if (e.action == TraceAction::FreeCompleted && e.addr == u(p)) {
            completed = true;
            EXPECT_EQ(e.site, 3u);  // after the events: the allocation's stacks
            EXPECT_EQ(e.size, 4096u);
        }
    }
    EXPECT_TRUE(completed);
    alloc.free(q);
}

TEST_F(HistoryTest, OutOfMemoryEntry) {
    record(ContextLevel::All);
    int err = 0;
    OomReport oom;
    EXPECT_EQ(alloc.malloc(0, 200 * MiB, kS1, 11, &err, &oom), nullptr);
    DeviceSnapshot s = alloc.take_snapshot(0);
    ASSERT_FALSE(s.trace.empty());
    const TraceEntry& e = s.trace[s.trace.size() - 2];
    EXPECT_EQ(e.action, TraceAction::Oom);
    EXPECT_EQ(e.addr, oom.device_free);
    EXPECT_EQ(e.size, 200 * MiB);
    EXPECT_EQ(e.site, 11u);
}

TEST_F(HistoryTest, PoolFilter) {
    void* d = get(1000, 1);
    const MempoolId pool{0, 7};
    ASSERT_TRUE(alloc.begin_allocate_to_pool(0, pool, [](Stream s) { return s == kS2; }));
    void* p = get(1000, 2, kS2);
    ASSERT_TRUE(alloc.end_allocate_to_pool(0, pool));
    EXPECT_EQ(alloc.take_snapshot(0).segments.size(), 2u);
    DeviceSnapshot s = alloc.take_snapshot(0, pool);
    ASSERT_EQ(s.segments.size(), 1u);
    EXPECT_EQ(s.segments[0].pool, pool);
    EXPECT_EQ(s.segments[0].blocks[0].address, u(p));
    alloc.free(p);
    alloc.free(d);
    ASSERT_TRUE(alloc.release_pool(0, pool));
}

}  // namespace
}  // namespace memguard::alloc

namespace memguard::alloc {
namespace {

TEST(HistoryExpandable, MappedRunsAreSegmentsAndMapsAreTraced) {
    FakeBackend fake(1, 1024 * MiB);
    AllocatorConfig cfg;
    cfg.expandable_segments = true;
    CachingAllocator alloc(fake, 1, cfg);
    HistoryConfig c;
    c.enabled = true;
    c.context = ContextLevel::All;
    c.max_entries = 1000;
    alloc.set_history(c);
    int err = 0;
    void* a = alloc.malloc(0, 30 * MiB, kS1, 21, &err);  // maps two 20 MiB pages
    ASSERT_NE(a, nullptr);
    DeviceSnapshot s = alloc.take_snapshot(0);
    ASSERT_EQ(s.segments.size(), 1u);  // the mapped run, not the whole reserved range
    EXPECT_TRUE(s.segments[0].expandable);
    EXPECT_EQ(s.segments[0].address, u(a));
    EXPECT_EQ(s.segments[0].total_size, 40 * MiB);
    EXPECT_EQ(s.segments[0].allocated_size, 30 * MiB);
    ASSERT_FALSE(s.trace.empty());
    EXPECT_EQ(trace_action_name(s.trace[0].action), std::string("segment_map"));
    EXPECT_EQ(s.trace[0].addr, u(a));
    EXPECT_EQ(s.trace[0].size, 40 * MiB);
    EXPECT_EQ(s.trace[0].site, 21u);
    EXPECT_EQ(trace_action_name(s.trace[1].action), std::string("alloc"));
    alloc.free(a);
    ASSERT_TRUE(alloc.empty_cache());
    s = alloc.take_snapshot(0);
    EXPECT_TRUE(s.segments.empty());  // nothing mapped
    bool unmapped = false;
    for (const TraceEntry& e : s.trace) unmapped = unmapped || e.action == TraceAction::SegmentUnmap;
    EXPECT_TRUE(unmapped);
    EXPECT_EQ(alloc.check_invariants(0), "");
    EXPECT_EQ(fake.misuses(), std::vector<std::string>{});
}

}  // namespace
}  // namespace memguard::alloc

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "track/capture.h"

using memguard::track::CaptureInfo;
using memguard::track::CaptureMode;
using memguard::track::CaptureView;
using memguard::track::GraphRegistry;
using memguard::track::StreamArg;

namespace {
StreamArg S(uintptr_t handle) { return StreamArg{true, handle, false}; }
const StreamArg kNoStream{};
}  // namespace

TEST(CaptureView, BeginEndAndOwnership) {
    CaptureView v;
    EXPECT_EQ(v.active(), 0);
    uint32_t a = v.begin(S(0x10), CaptureMode::Global, 100);
    uint32_t b = v.begin(S(0x20), CaptureMode::Relaxed, 200);
    EXPECT_NE(a, 0u);
    EXPECT_NE(b, 0u);
    EXPECT_NE(a, b);
    EXPECT_EQ(v.active(), 2);
    // By stream first, whatever the thread.
    EXPECT_EQ(v.owner_for(S(0x20), 100).id, b);
    // No stream: the capture the allocating thread began.
    EXPECT_EQ(v.owner_for(kNoStream, 100).id, a);
    EXPECT_EQ(v.owner_for(kNoStream, 200).id, b);
    // Another thread, no capture of its own: not owned.
    EXPECT_EQ(v.owner_for(kNoStream, 300).id, 0u);
    CaptureInfo ended = v.end(S(0x10), 0);
    EXPECT_EQ(ended.id, a);
    EXPECT_EQ(ended.tid, 100u);
    EXPECT_EQ(ended.mode, CaptureMode::Global);
    EXPECT_EQ(v.end(S(0x10), 0).id, 0u);
    EXPECT_EQ(v.active(), 1);
    EXPECT_EQ(v.owner_for(kNoStream, 100).id, 0u);
}

TEST(CaptureView, MostRecentCaptureOfTheThreadOwns) {
    CaptureView v;
    uint32_t first = v.begin(S(0x10), CaptureMode::Global, 7);
    uint32_t second = v.begin(S(0x20), CaptureMode::Global, 7);
    EXPECT_EQ(v.owner_for(kNoStream, 7).id, second);
    v.end(S(0x20), 0);
    EXPECT_EQ(v.owner_for(kNoStream, 7).id, first);
}

TEST(CaptureView, UnsafeCallRulesFollowCuda) {
    CaptureView v;
    EXPECT_EQ(v.prohibiting(1, CaptureMode::Global).id, 0u);  // nothing capturing
    uint32_t global = v.begin(S(0x10), CaptureMode::Global, 1);
    // The capturing thread itself, unless relaxed.
    EXPECT_EQ(v.prohibiting(1, CaptureMode::Global).id, global);
    EXPECT_EQ(v.prohibiting(1, CaptureMode::ThreadLocal).id, global);
    EXPECT_EQ(v.prohibiting(1, CaptureMode::Relaxed).id, 0u);
    // Other threads: a global-mode capture forbids them in global mode only.
    EXPECT_EQ(v.prohibiting(2, CaptureMode::Global).id, global);
    EXPECT_EQ(v.prohibiting(2, CaptureMode::ThreadLocal).id, 0u);
    EXPECT_EQ(v.prohibiting(2, CaptureMode::Relaxed).id, 0u);
    v.end(S(0x10), 0);
    uint32_t local = v.begin(S(0x20), CaptureMode::ThreadLocal, 1);
    EXPECT_EQ(v.prohibiting(1, CaptureMode::Global).id, local);
    EXPECT_EQ(v.prohibiting(2, CaptureMode::Global).id, 0u);  // thread-local captures ignore others
    v.end(S(0x20), 0);
    v.begin(S(0x30), CaptureMode::Relaxed, 1);
    EXPECT_EQ(v.prohibiting(1, CaptureMode::Global).id, 0u);  // a relaxed capture forbids nothing
    EXPECT_EQ(v.prohibiting(2, CaptureMode::Global).id, 0u);
}

TEST(CaptureView, SlotsAreReusedAndIdsStayUnique) {
    CaptureView v;
    std::vector<uint32_t> ids;
    for (int i = 0; i < 3 * CaptureView::kSlots; ++i) {
        ids.push_back(v.begin(S(0x100 + static_cast<uintptr_t>(i)), CaptureMode::Global, 1));
        EXPECT_EQ(v.end(S(0x100 + static_cast<uintptr_t>(i)), 1).id, ids.back());
    }
    for (size_t i = 1; i < ids.size(); ++i) EXPECT_GT(ids[i], ids[i - 1]);
    EXPECT_EQ(v.active(), 0);
}

TEST(CaptureView, ConcurrentCapturesOnManyThreads) {
    CaptureView v;
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 2000; ++i) {
                uintptr_t stream = 0x1000u * static_cast<uintptr_t>(t + 1) + static_cast<uintptr_t>(i % 4);
                uint32_t id = v.begin(S(stream), CaptureMode::ThreadLocal, static_cast<uint64_t>(t + 1));
                if (id == 0 || v.owner_for(S(stream), 99).id != id || v.end(S(stream), 0).id != id) failures++;
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(v.active(), 0);
}

TEST(GraphRegistry, FollowsGraphsAndExecsToTheirCapture) {
    GraphRegistry r;
    r.captured(0xa, 5);
    EXPECT_EQ(r.instantiated(0xe1, 0xa), 5u);
    EXPECT_EQ(r.instantiated(0xe2, 0xa), 5u);
    EXPECT_EQ(r.instantiated(0xe3, 0xb), 0u);  // a graph memguard did not see captured
    EXPECT_NE(r.live_exec_of(5), 0u);
    r.graph_destroyed(0xa);  // execs outlive their graph
    EXPECT_NE(r.live_exec_of(5), 0u);
    EXPECT_EQ(r.exec_destroyed(0xe1), 5u);
    EXPECT_EQ(r.live_exec_of(5), 0xe2u);
    EXPECT_EQ(r.exec_destroyed(0xe2), 5u);
    EXPECT_EQ(r.live_exec_of(5), 0u);
    EXPECT_EQ(r.exec_destroyed(0xe2), 0u);
}

TEST(CaptureView, PerThreadDefaultStreamsAreDistinctPerThread) {
    CaptureView v;
    StreamArg per_thread = memguard::track::make_stream_arg(0, /*ptsz_call=*/true);
    EXPECT_TRUE(per_thread.per_thread);
    EXPECT_EQ(per_thread.handle, memguard::track::make_stream_arg(0x2, false).handle);
    uint32_t a = v.begin(per_thread, CaptureMode::Global, 1);
    uint32_t b = v.begin(per_thread, CaptureMode::Global, 2);
    EXPECT_NE(a, b);
    EXPECT_EQ(v.owner_for(per_thread, 1).id, a);
    EXPECT_EQ(v.owner_for(per_thread, 2).id, b);
    EXPECT_EQ(v.end(per_thread, 2).id, b);  // thread 2's stream, not thread 1's
    EXPECT_EQ(v.owner_for(per_thread, 1).id, a);
    EXPECT_EQ(v.end(per_thread, 1).id, a);
}

TEST(CaptureView, UntrackedCaptureStopsThreadBasedOwnership) {
    CaptureView v;
    for (int i = 0; i < CaptureView::kSlots; ++i) {
        ASSERT_NE(v.begin(S(0x100 + static_cast<uintptr_t>(i)), CaptureMode::Global, 7), 0u);
    }
    EXPECT_EQ(v.begin(S(0x999), CaptureMode::Global, 7), 0u);  // no slot left: untracked
    EXPECT_EQ(v.owner_for(kNoStream, 7).id, 0u);               // might be the untracked capture's
    EXPECT_EQ(v.owner_for(S(0x100), 7).id, 1u);                // by stream it is still known
    EXPECT_EQ(v.end(S(0x999), 7).id, 0u);                      // the untracked one ends
    EXPECT_EQ(v.owner_for(kNoStream, 7).id, static_cast<uint32_t>(CaptureView::kSlots));
}

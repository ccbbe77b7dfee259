// The recorder in-process: the report's start, allocations and frees, stacks, live bytes and
// ownership by stream captures.
#include <functional>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

#include "recorder_fixture.h"

namespace memguard::track::testing {
namespace {

using report::Report;

uint64_t this_tid() { return static_cast<uint64_t>(syscall(SYS_gettid)); }

Recorder::Collection automatic_collection() {
    Recorder::Collection c;
    c.trigger = format::GcTrigger::Automatic;
    c.generation = 0;
    c.duration_ns = 10;
    c.collected = c.uncollectable = 0;
    c.cuda_bytes_freed = -1;
    c.mark_age_ns = -1;
    return c;
}

TEST_F(RecorderTest, TheFirstAllocationStartsTheReportWithItsHeader) {
    EXPECT_EQ(sink.report_count(), 0u);
    EXPECT_EQ(recorder->report_path(), "");
    clock.set(1000);
    alloc(0x7000, 256);
    ASSERT_EQ(sink.report_count(), 1u);
    EXPECT_EQ(sink.path_of(0), "/in-memory/report.mgr");
    EXPECT_EQ(recorder->report_path(), "/in-memory/report.mgr");
    EXPECT_EQ(sink.text().rfind("MEMGUARD-REPORT 1\nI format_minor " + std::to_string(format::kFormatMinor) + "\n", 0),
              0u)
        << sink.text();
    const Report r = read();
    EXPECT_EQ(r.info.at("unwinder"), "fake");
    EXPECT_EQ(r.info.at("stack_depth"), "16");
    EXPECT_EQ(r.info.at("t0_unix_ns"), std::to_string(FakeClock::kOriginUnixNs));
    EXPECT_EQ(r.info.at("pid"), std::to_string(getpid()));
    EXPECT_EQ(r.info.count("allocator"), 0u);
}

TEST_F(RecorderTest, AnAllocationIsAnARecordWithItsFields) {
    clock.set(1234);
    alloc(0x7000, 4096, make_stream_arg(0xabc, false), Kind::Async, Api::cudaMallocAsync, 3);
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 1u);
    const report::Block& b = r.blocks[0];
    EXPECT_EQ(b.addr, 0x7000u);
    EXPECT_EQ(b.size, 4096u);
    EXPECT_EQ(b.kind, report::Kind::Async);
    EXPECT_EQ(b.api, "cudaMallocAsync");
    EXPECT_EQ(b.device, 3);
    EXPECT_EQ(b.stream, std::optional<uint64_t>(0xabc));
    EXPECT_EQ(b.tid, this_tid());
    EXPECT_EQ(b.t_alloc, 1234);
    EXPECT_FALSE(b.t_free.has_value());
    EXPECT_EQ(b.capture_id, 0u);
    ASSERT_EQ(r.stacks.count(b.stack_id), 1u);
    EXPECT_EQ(r.stacks.at(b.stack_id).ips, std::vector<uint64_t>(kFrames.begin(), kFrames.end()));
    // A call that names no stream says so.
    alloc(0x8000, 16);
    EXPECT_FALSE(read().blocks[1].stream.has_value());
}

TEST_F(RecorderTest, AStackIsWrittenOnceAndSharedByItsAllocations) {
    alloc(0x1000, 1);
    alloc(0x2000, 2);
    unwinder.set_frames({0x20001000, 0x20002000});
    alloc(0x3000, 3);
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 3u);
    EXPECT_EQ(lines_of('S').size(), 2u);
    EXPECT_NE(r.blocks[0].stack_id, 0u);
    EXPECT_EQ(r.blocks[0].stack_id, r.blocks[1].stack_id);
    EXPECT_NE(r.blocks[2].stack_id, r.blocks[0].stack_id);
    EXPECT_EQ(r.stacks.at(r.blocks[2].stack_id).ips, (std::vector<uint64_t>{0x20001000, 0x20002000}));
    // The S record comes before the first A that names it.
    EXPECT_LT(position_of('S'), position_of('A'));
}

TEST_F(RecorderTest, OwnFramesAreDroppedAndTheStackIsCutToTheDepth) {
    unwinder.set_own_code(TextRange{0x10000000, 0x10002001});  // the first two frames are "memguard's"
    unwinder.set_frames({0x10001000, 0x10002000, 0x30001000, 0x30002000, 0x30003000, 0x30004000});
    Config config = test_config();
    config.stack_depth = 3;
    build(config);
    alloc(0x1000, 1);
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 1u);
    EXPECT_EQ(r.stacks.at(r.blocks[0].stack_id).ips, (std::vector<uint64_t>{0x30001000, 0x30002000, 0x30003000}));
}

TEST_F(RecorderTest, StackDepthZeroUnwindsNothing) {
    Config config = test_config();
    config.stack_depth = 0;
    build(config);
    alloc(0x1000, 1);
    EXPECT_EQ(unwinder.captures(), 0);
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 1u);
    EXPECT_EQ(r.blocks[0].stack_id, 0u);
    EXPECT_TRUE(lines_of('S').empty());
}

TEST_F(RecorderTest, AFreeIsAnFRecordAndLiveBytesFollowTheBlocks) {
    clock.set(10);
    alloc(0x1000, 100);
    alloc(0x2000, 200);
    alloc(0x3000, 1000, {}, Kind::Pinned, Api::cudaMallocHost);  // host memory: not GPU live bytes
    alloc(0x4000, 50, {}, Kind::Device, Api::cudaMalloc, 1);     // another device
    clock.set(20);
    EXPECT_TRUE(free_block(0x1000, make_stream_arg(0x5, false), Api::cudaFreeAsync));
    failed_alloc(1 << 30);
    failed_alloc(1 << 30, 1);
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 4u);
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(20));
    EXPECT_EQ(r.blocks[0].free_api, "cudaFreeAsync");
    EXPECT_FALSE(r.blocks[1].t_free.has_value());
    const std::vector<std::string> frees = lines_of('F');
    ASSERT_EQ(frees.size(), 1u);
    EXPECT_EQ(frees[0], "F 20 " + std::to_string(this_tid()) + " 1000 100 cudaFreeAsync 5");
    ASSERT_EQ(r.failures.size(), 2u);
    EXPECT_EQ(r.failures[0].live_bytes, 200u);
    EXPECT_EQ(r.failures[1].live_bytes, 50u);
}

TEST_F(RecorderTest, AFreeOfAnAddressThatIsNotLiveWritesNothing) {
    EXPECT_FALSE(free_block(0x1000));  // before the report exists
    EXPECT_EQ(sink.report_count(), 0u);
    alloc(0x1000, 100);
    EXPECT_FALSE(free_block(0x9000));
    EXPECT_TRUE(free_block(0x1000));
    EXPECT_FALSE(free_block(0x1000));  // twice
    EXPECT_EQ(lines_of('F').size(), 1u);
}

TEST_F(RecorderTest, AnUnseenFreeComesBeforeTheAllocationThatReusesTheAddress) {
    clock.set(5);
    alloc(0x1000, 100);
    clock.set(7);
    alloc(0x1000, 300);  // memguard never saw 0x1000 freed
    const std::vector<std::string> records = lines_of('F');
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0], "F 7 " + std::to_string(this_tid()) + " 1000 100 unseen -");
    const std::string text = sink.text();
    EXPECT_LT(text.find("\nF 7 "), text.find("\nA 7 "));
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 2u);
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(7));
    EXPECT_EQ(r.blocks[0].free_api, "unseen");
    EXPECT_FALSE(r.blocks[1].t_free.has_value());
    failed_alloc(1);
    EXPECT_EQ(read().failures[0].live_bytes, 300u);  // the replaced block's bytes are gone
}

// --- capture ownership ---------------------------------------------------------------------------

/// An allocation made by another thread.
void on_another_thread(const std::function<void()>& f) { std::thread(f).join(); }

TEST_F(RecorderTest, ACaptureOwnsTheBlocksOfItsStreamAndOfItsThread) {
    const StreamArg capturing = make_stream_arg(0x51, false);
    const StreamArg other = make_stream_arg(0x52, false);
    recorder->record_capture_begin(capturing, CaptureMode::ThreadLocal, 0);
    alloc(0x1000, 1, capturing, Kind::Async, Api::cudaMallocAsync);  // on the capturing stream
    alloc(0x2000, 2);                                                // by the capturing thread, no stream
    on_another_thread([&] { alloc(0x3000, 3); });                    // another thread, no stream
    on_another_thread([&] { alloc(0x4000, 4, other, Kind::Async, Api::cudaMallocAsync); });
    on_another_thread([&] { alloc(0x5000, 5, capturing, Kind::Async, Api::cudaMallocAsync); });
    recorder->record_capture_end(capturing, 0, 0x9999);
    alloc(0x6000, 6);  // after the capture
    const Report r = read();
    ASSERT_EQ(r.captures.size(), 1u);
    const uint32_t id = r.captures[0].id;
    EXPECT_NE(id, 0u);
    EXPECT_EQ(r.captures[0].stream, 0x51u);
    EXPECT_EQ(r.captures[0].graph, std::optional<uint64_t>(0x9999));
    ASSERT_EQ(r.blocks.size(), 6u);
    EXPECT_EQ(r.blocks[0].capture_id, id);
    EXPECT_EQ(r.blocks[1].capture_id, id);
    EXPECT_EQ(r.blocks[2].capture_id, 0u);
    EXPECT_EQ(r.blocks[3].capture_id, 0u);
    EXPECT_EQ(r.blocks[4].capture_id, id);
    EXPECT_EQ(r.blocks[5].capture_id, 0u);
}

// --- the report's state ------------------------------------------------------------------------------

TEST_F(RecorderTest, AReportThatCannotStartLeavesTheRecorderInactive) {
    sink.fail_next_start("no room");
    alloc(0x1000, 1);
    EXPECT_EQ(sink.report_count(), 0u);
    EXPECT_FALSE(recorder->active());
    alloc(0x2000, 1);  // no second try
    EXPECT_EQ(sink.report_count(), 0u);
    EXPECT_EQ(recorder->report_path(), "");
}

TEST_F(RecorderTest, ADisabledRecorderWritesNothing) {
    Config config = test_config();
    config.enabled = false;
    build(config);
    EXPECT_FALSE(recorder->active());
    alloc(0x1000, 1);
    EXPECT_EQ(recorder->record_phase_begin(PhaseSource::Api, "p"), 0u);
    recorder->record_mark(PhaseSource::Api, "m");
    recorder->record_collection(automatic_collection());
    recorder->flush();
    recorder->shutdown();
    EXPECT_EQ(sink.report_count(), 0u);
    EXPECT_EQ(sink.pending(), 0u);
}

TEST_F(RecorderTest, ShutdownEndsTheReportAndRecordingStops) {
    alloc(0x1000, 1);
    clock.set(99);
    recorder->shutdown();
    EXPECT_FALSE(recorder->active());
    alloc(0x2000, 2);
    EXPECT_FALSE(free_block(0x1000));
    const Report r = read();
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.end_t, 99);
    EXPECT_EQ(r.blocks.size(), 1u);
}

// Allocator mode's T and t go packed and are formatted when written out: their times are stamps
// of the clock, converted there.
TEST_F(RecorderTest, TensorRecordsArePackedAndTheirStampsConvertedWhenWrittenOut) {
    recorder->set_allocator_mode();
    Recorder::TensorBlock b;
    b.addr = 0x1000;
    b.size = 512;
    b.requested = 500;
    b.stream = 0x7;
    clock.set(4242);
    recorder->record_block_alloc(b);
    clock.set(4343);
    recorder->record_block_free(0x1000, true);
    EXPECT_EQ(sink.text().find("\nT "), std::string::npos) << "packed records wait for the writer";
    const int anchors = clock.anchors();
    const Report r = read();
    EXPECT_GT(clock.anchors(), anchors);
    EXPECT_EQ(r.info.at("allocator"), "memguard");
    ASSERT_EQ(r.tensors.size(), 1u);
    EXPECT_EQ(r.tensors[0].t_alloc, 4242);
    EXPECT_EQ(r.tensors[0].t_free, std::optional<int64_t>(4343));
    EXPECT_TRUE(r.tensors[0].freed_in_gc);
    EXPECT_EQ(r.tensors[0].size, 512u);
    EXPECT_EQ(r.tensors[0].pool, "-");
}

}  // namespace
}  // namespace memguard::track::testing

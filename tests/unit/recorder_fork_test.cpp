// The recorder's fork protocol in-process: the handlers' state changes, driven as pthread_atfork
// drives them, without forking (the child's side is this process playing the child).
#include "recorder_fixture.h"

namespace memguard::track::testing {
namespace {

using report::Report;

TEST_F(RecorderTest, AfterForkParentChangesNothing) {
    clock.set(10);
    alloc(0x1000, 100);
    const uint64_t phase = recorder->record_phase_begin(PhaseSource::Api, "train");
    const uint32_t epoch = recorder->report_epoch();
    recorder->before_fork();
    EXPECT_TRUE(unwinder.fork_blocked()) << "no thread unwinds across the fork";
    recorder->after_fork_parent();
    EXPECT_FALSE(unwinder.fork_blocked());
    EXPECT_EQ(recorder->report_epoch(), epoch);
    EXPECT_EQ(clock.restarts(), 0);
    EXPECT_TRUE(recorder->recording());
    EXPECT_TRUE(free_block(0x1000));
    EXPECT_TRUE(recorder->record_phase_end(phase));
    alloc(0x2000, 200);
    EXPECT_EQ(sink.report_count(), 1u);
    const Report r = read();
    ASSERT_EQ(r.blocks.size(), 2u);
    EXPECT_TRUE(r.blocks[0].t_free.has_value());
    EXPECT_EQ(r.blocks[0].stack_id, r.blocks[1].stack_id) << "the stack is still known";
    EXPECT_EQ(lines_of('S').size(), 1u);
    ASSERT_EQ(r.phases.size(), 1u);
    EXPECT_TRUE(r.phases[0].t_end.has_value());
}

TEST_F(RecorderTest, AfterForkChildStartsANewReportWithNothingOfTheParents) {
    clock.set(10);
    alloc(0x1000, 100);
    const StreamArg stream = make_stream_arg(0x51, false);
    recorder->record_capture_begin(stream, CaptureMode::Global, 0);
    const uint64_t phase = recorder->record_phase_begin(PhaseSource::Api, "train");
    recorder->flush();
    const std::string parents = sink.text(0);
    const uint32_t epoch = recorder->report_epoch();

    clock.set(50);
    recorder->before_fork();
    EXPECT_TRUE(unwinder.fork_blocked());
    recorder->after_fork_child();
    EXPECT_FALSE(unwinder.fork_blocked());
    EXPECT_EQ(recorder->report_epoch(), epoch + 1) << "ids interned for the parent's report are not reused";
    EXPECT_EQ(clock.restarts(), 1) << "the child's time starts over";
    EXPECT_FALSE(recorder->recording());
    EXPECT_TRUE(recorder->active());
    EXPECT_EQ(recorder->report_path(), "") << "the child's report is made lazily";
    EXPECT_FALSE(recorder->gpu_seen());
    EXPECT_EQ(recorder->captures().active(), 0);

    // The parent's block, phase and capture are not the child's.
    EXPECT_FALSE(free_block(0x1000));
    EXPECT_FALSE(recorder->record_phase_end(phase));
    clock.set(3);
    alloc(0x2000, 200, stream, Kind::Async, Api::cudaMallocAsync);
    ASSERT_EQ(sink.report_count(), 2u);
    EXPECT_EQ(sink.text(0), parents) << "the parent's report is left as it was";
    const Report child = read(1);
    EXPECT_EQ(child.info.at("t0_unix_ns"), std::to_string(FakeClock::kOriginUnixNs + 50));
    ASSERT_EQ(child.blocks.size(), 1u);
    EXPECT_EQ(child.blocks[0].addr, 0x2000u);
    EXPECT_EQ(child.blocks[0].t_alloc, 3);
    EXPECT_EQ(child.blocks[0].capture_id, 0u) << "the parent's capture does not own the child's block";
    EXPECT_TRUE(child.phases.empty());
    EXPECT_TRUE(child.captures.empty());
    // Its stacks are its own: written again, numbered from 1.
    EXPECT_EQ(lines_of('S', 1).size(), 1u);
    EXPECT_EQ(child.blocks[0].stack_id, 1u);
    EXPECT_EQ(child.stacks.at(1).ips, std::vector<uint64_t>(kFrames.begin(), kFrames.end()));
    // Phase ids keep counting: an id the parent handed out never names a child's phase.
    EXPECT_GT(recorder->record_phase_begin(PhaseSource::Api, "child"), phase);
}

TEST_F(RecorderTest, AForkChildForgetsTheRecordsWaitingForTheParentsReport) {
    recorder->record_mark(PhaseSource::Api, "parent's");
    recorder->before_fork();
    recorder->after_fork_child();
    recorder->record_mark(PhaseSource::Api, "child's");
    alloc(0x1000, 1);
    ASSERT_EQ(sink.report_count(), 1u);
    const Report r = read();
    ASSERT_EQ(r.marks.size(), 1u);
    EXPECT_EQ(r.marks[0].name, "child's");
}

TEST_F(RecorderTest, AForkChildOfAFailedReportTriesAgain) {
    sink.fail_next_start("no room");
    alloc(0x1000, 1);
    EXPECT_FALSE(recorder->active());
    recorder->before_fork();
    recorder->after_fork_child();
    EXPECT_TRUE(recorder->active());
    alloc(0x2000, 1);
    ASSERT_EQ(sink.report_count(), 1u);
    EXPECT_EQ(read().blocks.size(), 1u);
}

}  // namespace
}  // namespace memguard::track::testing

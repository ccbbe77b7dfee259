// The recorder's minor-8 records (track/records_insight.cpp) read back with the real reader: steps
// wait for the report like phases, moments need a report except at an out-of-memory (which starts
// it), g and d records belong to their moment, x carries what it was given with its own time and
// thread.
#include <gtest/gtest.h>

#include "recorder_fixture.h"

namespace memguard::track::testing {
namespace {

using format::Category;
using format::MomentReason;
using format::OomSource;
using format::StepSource;

TEST_F(RecorderTest, StepsBeforeTheReportWaitAndFollowTheHeader) {
    recorder->record_step(1, StepSource::Optimizer, "AdamW");
    EXPECT_EQ(sink.report_count(), 0u);  // a step never creates the report
    clock.advance(10);
    alloc(0x1000, 4096);
    recorder->record_step(2, StepSource::Api, "epoch end");
    report::Report r = read();
    ASSERT_EQ(r.steps.size(), 2u);
    EXPECT_EQ(r.steps[0].index, 1u);
    EXPECT_EQ(r.steps[0].name, "AdamW");
    EXPECT_EQ(r.steps[0].source, report::StepSource::Optimizer);
    EXPECT_EQ(r.steps[1].index, 2u);
    EXPECT_EQ(r.steps[1].source, report::StepSource::Api);
    EXPECT_EQ(r.steps[1].name, "epoch end");
}

TEST_F(RecorderTest, AStepMomentNeedsAReportAndCarriesItsTagsAndBlocks) {
    EXPECT_EQ(recorder->record_moment_begin(MomentReason::Step, 0), 0u);  // no report: nothing
    alloc(0x10000, 1 << 20);
    recorder->record_step(1, StepSource::Optimizer, "SGD");
    uint32_t id = recorder->record_moment_begin(MomentReason::Step, 1);
    ASSERT_NE(id, 0u);
    format::rec::TensorTag g;
    g.moment = id;
    g.addr = 0x10000;
    g.size = 512;
    g.category = Category::Parameter;
    g.label = "layer.weight";
    recorder->record_tensor_tag(g);
    g.addr = 0x10200;
    g.category = Category::OptimizerState;
    g.label = std::nullopt;
    recorder->record_tensor_tag(g);
    format::rec::AllocatorBlock d;
    d.moment = id;
    d.addr = 0x10000;
    d.size = 1024;
    d.requested = 1000;
    d.segment = 0x10000;
    d.pool = "-";
    recorder->record_allocator_block(d);
    g.moment = 0;  // no moment: dropped
    recorder->record_tensor_tag(g);
    clock.advance(5);
    recorder->record_moment_end(id, 2, 1, true);
    report::Report r = read();
    ASSERT_EQ(r.moments.size(), 1u);
    const report::Moment& m = r.moments[0];
    EXPECT_EQ(m.id, id);
    EXPECT_EQ(m.reason, report::MomentReason::Step);
    EXPECT_EQ(m.step, 1u);
    ASSERT_EQ(m.tags.size(), 2u);
    EXPECT_EQ(m.tags[0].label, "layer.weight");
    EXPECT_EQ(m.tags[0].category, report::Category::Parameter);
    EXPECT_EQ(m.tags[1].label, "");
    EXPECT_EQ(m.tags[1].category, report::Category::OptimizerState);
    ASSERT_EQ(m.blocks.size(), 1u);
    EXPECT_EQ(m.blocks[0].requested, 1000u);
    EXPECT_TRUE(m.ended);
    EXPECT_TRUE(m.complete);
    EXPECT_EQ(m.t_end - m.t, 5);
}

TEST_F(RecorderTest, AnOutOfMemoryMomentStartsTheReportAndItsContextNamesIt) {
    uint32_t id = recorder->record_moment_begin(MomentReason::Oom, 3);
    ASSERT_NE(id, 0u);  // the first CUDA allocation failed: the OOM still gets its report
    format::rec::OomContext x;
    x.device = 1;
    x.source = OomSource::Torch;
    x.rounded = 2 << 20;
    x.limit = 8ull << 30;
    x.device_free = 12345;
    x.allocated = 7ull << 30;
    x.moment = id;
    x.compile_pending = true;
    x.t = 999;  // set by the recorder
    clock.advance(42);
    recorder->record_oom_context(x);
    recorder->record_moment_end(id, 0, 0, false);
    report::Report r = read();
    ASSERT_EQ(r.oom_contexts.size(), 1u);
    const report::OomContext& o = r.oom_contexts[0];
    EXPECT_EQ(o.device, 1);
    EXPECT_EQ(o.source, report::OomSource::Torch);
    EXPECT_FALSE(o.requested.has_value());
    EXPECT_EQ(o.rounded, 2u << 20);
    EXPECT_EQ(o.limit, 8ull << 30);
    EXPECT_EQ(o.device_free, 12345u);
    EXPECT_FALSE(o.device_total.has_value());
    EXPECT_TRUE(o.compile_pending);
    EXPECT_NE(o.t, 999);
    ASSERT_TRUE(o.moment.has_value());
    EXPECT_EQ(r.moments[*o.moment].id, id);
    EXPECT_FALSE(r.moments[*o.moment].complete);
}

TEST_F(RecorderTest, AFailedAllocationsContextStartsTheReportWithoutAMoment) {
    format::rec::OomContext x;
    x.source = OomSource::Cuda;
    x.requested = 4096;
    x.rounded = 4096;
    recorder->record_oom_context(x);
    report::Report r = read();
    ASSERT_EQ(r.oom_contexts.size(), 1u);
    EXPECT_EQ(r.oom_contexts[0].source, report::OomSource::Cuda);
    EXPECT_EQ(r.oom_contexts[0].requested, 4096u);
    EXPECT_FALSE(r.oom_contexts[0].moment.has_value());
}

}  // namespace
}  // namespace memguard::track::testing

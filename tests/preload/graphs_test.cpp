// graph_pool under memguard: a capture whose graph gets a private pool, replayed by two execs, in
// the legacy and the per-thread default stream entry points. The capture (C, c), graph (G, L, D,
// K) and allocation (A's capture_id) records against what the application logged; which blocks a
// capture owns: the capturing thread's relaxed-mode cudaMalloc, and stream-ordered allocations on
// the capturing stream from any thread, but not another thread's cudaMalloc.
#include "capture_fixture.h"

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

// The parameter: which entry points the capture, instantiate-with-params and launch calls use.
class GraphPool : public CaptureTest, public ::testing::WithParamInterface<std::string> {
protected:
    struct Run {
        ChildResult result;
        AppLog log;
        std::optional<report::Report> report;
        std::string path;
    };

    Run run_scenario(const std::string& scenario) {
        std::vector<std::string> args = {scenario};
        if (GetParam() == "ptsz") args.push_back("ptsz");
        Run run;
        run.result = run_compared("graph_pool", args);
        run.log = parse_app_log(run.result.out);
        run.path = report_for(run.result.pid);
        run.report = load_clean(run.result);
        return run;
    }

    /// What every scenario shares: one global-mode capture on the logged stream, begun and ended
    /// by the main thread, its graph instantiated twice, the execs launched 3 and 5 + 1 times,
    /// exec1 destroyed, then the graph, then exec2; the blocks as logged; no hazard but the
    /// warm-up retention a scenario expects (checked by the caller).
    void expect_capture_lifecycle(const Run& run, const std::optional<uint64_t>& target_graph) {
        const report::Report& r = *run.report;
        const AppLog& log = run.log;
        const uint64_t main_tid = log.value("tid_main");
        const uint64_t stream = log.value("stream");
        const uint64_t graph = log.value("graph");

        ASSERT_EQ(r.captures.size(), 1u);
        const report::Capture& c = r.captures[0];
        EXPECT_EQ(c.id, 1u);
        EXPECT_EQ(hex(c.stream), hex(stream));
        EXPECT_STREQ(report::capture_mode_name(c.mode), "global");
        EXPECT_EQ(c.tid, main_tid);
        EXPECT_EQ(c.target_graph, target_graph);
        ASSERT_TRUE(c.t_end.has_value()) << "no c record";
        EXPECT_EQ(c.end_tid, main_tid);
        EXPECT_EQ(c.end_error, 0);
        EXPECT_EQ(c.graph, std::optional<uint64_t>(graph));
        EXPECT_TRUE(c.t_graph_destroy.has_value()) << "the graph's K record is missing";
        // The runtime's own id of the capture (cudaStreamGetCaptureInfo; the fake counts from 1).
        EXPECT_EQ(log.value("capture_sequence"), 1u);
        EXPECT_EQ(log.value("status_in_capture"), 1u);
        EXPECT_EQ(log.value("status_after_capture"), 0u);
        EXPECT_EQ(log.value("instantiate_result"), 0u);

        ASSERT_EQ(r.execs.size(), 2u);
        const uint64_t launches[] = {k_exec1_launches, k_exec2_launches + 1};
        const char* keys[] = {"exec1", "exec2"};
        for (size_t i = 0; i < 2; ++i) {
            SCOPED_TRACE(keys[i]);
            const report::GraphExec& e = r.execs[i];
            EXPECT_EQ(hex(e.exec), hex(log.value(keys[i])));
            EXPECT_EQ(hex(e.graph), hex(graph));
            EXPECT_EQ(e.capture_id, 1u);
            EXPECT_EQ(e.tid, main_tid);
            EXPECT_EQ(e.launches, launches[i]);
            EXPECT_TRUE(e.t_destroy.has_value());
        }
        ASSERT_EQ(r.graph_destroys.size(), 1u);
        EXPECT_EQ(hex(r.graph_destroys[0].graph), hex(graph));
        EXPECT_EQ(r.graph_destroys[0].capture_id, 1u);
        EXPECT_EQ(r.execs[0].launches + r.execs[1].launches, log.value("fake_graph_launch_count"));

        // Order and handles of every lifecycle record, and the stream each launch names.
        const std::string s = handle_text(log, "stream"), g = handle_text(log, "graph"), e1 = handle_text(log, "exec1"),
                          e2 = handle_text(log, "exec2");
        std::vector<std::string> want = {"C " + s, "c " + g, "G " + e1, "G " + e2};
        for (int i = 0; i < k_exec1_launches; ++i) want.push_back("L " + e1);
        for (int i = 0; i < k_exec2_launches; ++i) want.push_back("L " + e2);
        for (const std::string& last : {"D " + e1, "K " + g, "L " + e2, "D " + e2}) want.push_back(last);
        EXPECT_EQ(lifecycle(run.path, "CcGLDK"), want);
        for (const auto& launch : raw_records(run.path, "L")) EXPECT_EQ(launch[4], s);

        // The C record names the target graph of cudaStreamBeginCaptureToGraph, else '-'.
        auto begins = raw_records(run.path, "C");
        ASSERT_EQ(begins.size(), 1u);
        EXPECT_EQ(begins[0][6], target_graph ? hex(*target_graph).substr(2) : "-");

        expect_report_matches_log(r, run.path, log);
        EXPECT_TRUE(r.hazards.unsafe_calls.empty());
        EXPECT_TRUE(r.hazards.frees_while_graph_alive.empty());
        EXPECT_TRUE(memguard_messages(run.result).empty()) << run.result.err;
    }
};

TEST_P(GraphPool, RelaxedMallocOfTheCapturingThreadIsTheCapturesPool) {
    Run run = run_scenario("same_thread");
    ASSERT_TRUE(run.report);
    expect_capture_lifecycle(run, std::nullopt);
    // The mode switches went through: global -> relaxed -> global.
    EXPECT_EQ(run.log.value("mode_before_pool"), 0u);
    EXPECT_EQ(run.log.value("mode_in_pool"), 2u);

    const report::Block* segment = only_block(*run.report, k_pool_segment);
    ASSERT_NE(segment, nullptr);
    EXPECT_EQ(segment->capture_id, 1u);
    EXPECT_EQ(segment->tid, run.log.value("tid_main"));
    EXPECT_EQ(segment->api, "cudaMalloc");
    Symbolizer symbolizer(*run.report);
    EXPECT_TRUE(symbolizer.has_function(segment->stack_id, "grow_private_pool"))
        << symbolizer.describe(segment->stack_id);
    // Owned memory is no warm-up retention.
    EXPECT_TRUE(run.report->hazards.warmup_retention.empty());
}

TEST_P(GraphPool, RelaxedMallocOfAnotherThreadIsNotTheCaptures) {
    Run run = run_scenario("other_thread");
    ASSERT_TRUE(run.report);
    const report::Report& r = *run.report;
    expect_capture_lifecycle(run, std::nullopt);
    EXPECT_EQ(run.log.value("helper_mode_before_pool"), 0u);
    EXPECT_EQ(run.log.value("helper_mode_in_pool"), 2u);

    const report::Block* segment = only_block(r, k_pool_segment);
    ASSERT_NE(segment, nullptr);
    EXPECT_EQ(segment->capture_id, 0u);
    EXPECT_EQ(segment->tid, run.log.value("tid_helper"));
    EXPECT_NE(segment->tid, run.log.value("tid_main"));

    // Not owned, allocated since 0 and live when the capture ends: warm-up retention at its end.
    ASSERT_EQ(r.hazards.warmup_retention.size(), 1u);
    const report::WarmupRetention& w = r.hazards.warmup_retention[0];
    EXPECT_EQ(w.capture_id, 1u);
    EXPECT_STREQ(report::capture_phase_name(w.phase), "end");
    EXPECT_EQ(w.since, 0);
    EXPECT_EQ(w.stack_id, segment->stack_id);
    EXPECT_EQ(w.blocks, 1u);
    EXPECT_EQ(w.bytes, k_pool_segment);
    EXPECT_EQ(w.tid, run.log.value("tid_main"));
    Symbolizer symbolizer(r);
    EXPECT_TRUE(symbolizer.has_function(w.stack_id, "helper_grow_private_pool")) << symbolizer.describe(w.stack_id);
}

TEST_P(GraphPool, StreamOrderedAllocationOnTheCapturingStreamIsTheCapturesFromAnyThread) {
    Run run = run_scenario("async_other_thread");
    ASSERT_TRUE(run.report);
    const report::Report& r = *run.report;
    expect_capture_lifecycle(run, std::nullopt);
    const uint64_t helper = run.log.value("tid_helper");

    const report::Block* on_capture = only_block(r, k_graph_async);
    const report::Block* on_side = only_block(r, k_graph_async_side);
    ASSERT_NE(on_capture, nullptr);
    ASSERT_NE(on_side, nullptr);
    EXPECT_EQ(on_capture->capture_id, 1u) << "owned through the stream it names";
    EXPECT_EQ(on_capture->stream, std::optional<uint64_t>(run.log.value("stream")));
    EXPECT_EQ(on_capture->tid, helper);
    EXPECT_EQ(on_side->capture_id, 0u) << "a stream that is not capturing, a thread with no capture";
    EXPECT_EQ(on_side->stream, std::optional<uint64_t>(run.log.value("side_stream")));
    EXPECT_EQ(on_side->tid, helper);
    // Stream-ordered allocation is legal during capture: no unsafe_call.

    ASSERT_EQ(r.hazards.warmup_retention.size(), 1u);
    const report::WarmupRetention& w = r.hazards.warmup_retention[0];
    EXPECT_EQ(w.capture_id, 1u);
    EXPECT_STREQ(report::capture_phase_name(w.phase), "end");
    EXPECT_EQ(w.since, 0);
    EXPECT_EQ(w.stack_id, on_side->stack_id);
    EXPECT_EQ(w.blocks, 1u);
    EXPECT_EQ(w.bytes, k_graph_async_side);
}

TEST_P(GraphPool, CaptureIntoAnExistingGraphNamesItAsTarget) {
    Run run = run_scenario("to_graph");
    ASSERT_TRUE(run.report);
    EXPECT_EQ(run.log.value("target_graph"), run.log.value("graph"));
    expect_capture_lifecycle(run, run.log.value("target_graph"));
    const report::Block* segment = only_block(*run.report, k_pool_segment);
    ASSERT_NE(segment, nullptr);
    EXPECT_EQ(segment->capture_id, 1u);
    EXPECT_TRUE(run.report->hazards.warmup_retention.empty());
}

INSTANTIATE_TEST_SUITE_P(EntryPoints, GraphPool, ::testing::Values("legacy", "ptsz"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace preload_test

// Stream capture at the edges: more captures at once than memguard has room for, capture and
// graph calls the runtime refuses, captures ended from another thread, and the per-thread default
// stream, which is a different stream in every thread. In every case the program's calls return
// what the runtime returns, and the report describes what really happened.
#include "capture_fixture.h"

#include <algorithm>

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

// ---- more captures than memguard's capture view holds ---------------------------------------------

class ManyCaptures : public CaptureTest {};

TEST_F(ManyCaptures, CaptureBeyondCapacityPassesThroughUnchanged) {
    ChildResult result = run_compared("many_captures", {});
    AppLog log = parse_app_log(result.out);
    // The runtime had all of them in progress at once, and each was active.
    EXPECT_EQ(log.value("fake_captures_in_progress"), static_cast<uint64_t>(k_many_captures));
    auto statuses = log.info.equal_range("status");
    EXPECT_EQ(std::count_if(statuses.first, statuses.second, [](const auto& kv) { return kv.second == 1; }),
              k_many_captures);

    // One warning, naming the capture that is not tracked.
    std::vector<std::string> messages = memguard_messages(result);
    ASSERT_EQ(messages.size(), 1u) << result.err;
    EXPECT_NE(messages[0].find("more than 64 stream captures"), std::string::npos) << messages[0];
    const uint64_t untracked = log.value("stream_" + std::to_string(k_capture_slots));
    EXPECT_NE(messages[0].find(hex(untracked)), std::string::npos) << messages[0];

    auto r = load_clean(result);
    ASSERT_TRUE(r);
    // The first 64 are tracked (ids 1..64), the 65th is not; once there is room again the next
    // capture is tracked (id 65).
    ASSERT_EQ(r->captures.size(), static_cast<size_t>(k_capture_slots + 1));
    for (int i = 0; i < k_capture_slots; ++i) {
        const report::Capture& c = r->captures[static_cast<size_t>(i)];
        SCOPED_TRACE("capture " + std::to_string(i + 1));
        EXPECT_EQ(c.id, static_cast<uint32_t>(i + 1));
        EXPECT_EQ(c.stream, log.value("stream_" + std::to_string(i)));
        ASSERT_TRUE(c.t_end.has_value());
        EXPECT_EQ(c.end_error, 0);
        EXPECT_EQ(c.graph, std::optional<uint64_t>(log.value("graph_" + std::to_string(i))));
        const report::Block* block = only_block(*r, many_capture_size(i));
        ASSERT_NE(block, nullptr);
        EXPECT_EQ(block->capture_id, c.id);
    }
    const report::Capture& extra = r->captures.back();
    EXPECT_EQ(extra.id, static_cast<uint32_t>(k_capture_slots + 1));
    EXPECT_EQ(extra.stream, log.value("stream_" + std::to_string(k_many_captures)));
    EXPECT_EQ(extra.graph, std::optional<uint64_t>(log.value("graph_extra")));
    for (const report::Capture& c : r->captures) EXPECT_NE(c.stream, untracked);

    // The untracked capture's graph is a graph memguard saw no capture of.
    const report::GraphExec* first = find_exec(*r, log.value("exec_first"));
    const report::GraphExec* last = find_exec(*r, log.value("exec_last"));
    ASSERT_TRUE(first && last);
    EXPECT_EQ(first->capture_id, 1u);
    EXPECT_EQ(last->capture_id, 0u);
    EXPECT_EQ(first->launches, 2u);
    EXPECT_EQ(last->launches, 2u);
    EXPECT_EQ(r->graph_destroys.size(), static_cast<size_t>(k_many_captures + 1));
    EXPECT_TRUE(r->hazards.unsafe_calls.empty());
    EXPECT_TRUE(r->hazards.frees_while_graph_alive.empty());
    expect_report_matches_log(*r, report_for(result.pid), log);
}

// The untracked capture's memory belongs to no capture memguard can name; it must not be taken
// for another capture's (that could report hazards about a graph that never used it).
TEST_F(ManyCaptures, UntrackedCapturesMemoryIsNotGivenToAnotherCapture) {
    ChildResult result = run_compared("many_captures", {});
    auto r = load_clean(result);
    ASSERT_TRUE(r);
    // Stream-ordered on the untracked capture's stream: "the capture in progress on the stream the
    // call names" is the untracked one.
    const report::Block* on_untracked = only_block(*r, many_capture_size(k_capture_slots));
    ASSERT_NE(on_untracked, nullptr);
    EXPECT_EQ(on_untracked->capture_id, 0u) << "owned by a capture on another stream";
    // Relaxed-mode cudaMalloc: "the most recent capture in progress that the allocating thread
    // began" is the untracked one too.
    const report::Block* segment = only_block(*r, k_pool_segment);
    ASSERT_NE(segment, nullptr);
    EXPECT_EQ(segment->capture_id, 0u) << "owned by a capture older than the thread's most recent";
}

// ---- refused calls ---------------------------------------------------------------------------------

class CaptureMisuse : public CaptureTest {};

TEST_F(CaptureMisuse, RefusedCallsPassThroughAndLeaveNoRecord) {
    ChildResult result = run_compared("capture_misuse", {"errors"});
    AppLog log = parse_app_log(result.out);
    // The runtime's answers the program relies on (it checks each call's result itself).
    EXPECT_EQ(log.value("capture1_status"), 1u);
    EXPECT_EQ(log.value("capture1_invalidated_status"), 2u);
    EXPECT_EQ(log.value("capture1_has_graph"), 1u);
    EXPECT_EQ(log.value("invalidated_graph_is_null"), 1u);
    EXPECT_EQ(log.value("capture2_status"), 1u);
    EXPECT_NE(log.value("capture2_sequence"), log.value("capture1_sequence"));
    EXPECT_EQ(log.value("bad_mode_left"), 9u);
    EXPECT_EQ(log.value("mode_after_refusals"), 0u);
    EXPECT_EQ(log.value("ended_is_target"), 1u);
    EXPECT_TRUE(memguard_messages(result).empty()) << result.err;

    auto r = load_clean(result);
    ASSERT_TRUE(r);
    // Only the three captures that began; each ended once, with what the runtime returned.
    ASSERT_EQ(r->captures.size(), 3u);
    const report::Capture& c1 = r->captures[0];
    const report::Capture& c2 = r->captures[1];
    const report::Capture& c3 = r->captures[2];
    for (const report::Capture* c : {&c1, &c2, &c3}) {
        EXPECT_EQ(c->stream, log.value("stream"));
        EXPECT_TRUE(c->t_end.has_value());
    }
    EXPECT_STREQ(report::capture_mode_name(c1.mode), "global");
    EXPECT_EQ(c1.end_error, 901);
    EXPECT_FALSE(c1.graph.has_value());
    EXPECT_STREQ(report::capture_mode_name(c2.mode), "thread_local");
    EXPECT_EQ(c2.end_error, 0);
    EXPECT_EQ(c2.graph, std::optional<uint64_t>(log.value("graph2")));
    EXPECT_STREQ(report::capture_mode_name(c3.mode), "global");
    EXPECT_EQ(c3.target_graph, std::optional<uint64_t>(log.value("graph3")));
    EXPECT_EQ(c3.end_error, 0);
    EXPECT_EQ(c3.graph, std::optional<uint64_t>(log.value("graph3")));
    EXPECT_EQ(raw_records(report_for(result.pid), "c").size(), 3u);

    // One exec, launched once (the launch of the destroyed exec failed) and destroyed once; each
    // graph destroyed once (the refused destroys are not recorded).
    ASSERT_EQ(r->execs.size(), 1u);
    EXPECT_EQ(r->execs[0].exec, log.value("exec2"));
    EXPECT_EQ(r->execs[0].capture_id, 2u);
    EXPECT_EQ(r->execs[0].launches, 1u);
    EXPECT_EQ(raw_records(report_for(result.pid), "D").size(), 1u);
    ASSERT_EQ(r->graph_destroys.size(), 2u);
    EXPECT_EQ(r->graph_destroys[0].graph, log.value("graph2"));
    EXPECT_EQ(r->graph_destroys[0].capture_id, 2u);
    EXPECT_EQ(r->graph_destroys[1].graph, log.value("graph3"));
    EXPECT_EQ(r->graph_destroys[1].capture_id, 3u);
    EXPECT_TRUE(r->blocks.empty());
    EXPECT_TRUE(r->hazards.unsafe_calls.empty());
    EXPECT_TRUE(r->hazards.warmup_retention.empty());
}

// cudaStreamEndCapture from a thread other than the one that began a global or thread-local
// capture is refused (cudaErrorStreamCaptureWrongThread) and the capture goes on; the capturing
// thread ends it later. A relaxed capture may be ended by any thread.
TEST_F(CaptureMisuse, EndRefusedForTheWrongThreadLeavesTheCaptureInProgress) {
    ChildResult result = run_compared("capture_misuse", {"wrong_thread"});
    AppLog log = parse_app_log(result.out);
    EXPECT_EQ(log.value("global_status_after_refusal"), 1u) << "still capturing after the refusal";
    EXPECT_EQ(log.value("local_status_after_refusal"), 1u);
    auto r = load_clean(result);
    ASSERT_TRUE(r);
    const uint64_t main_tid = log.value("tid_main");
    std::vector<uint64_t> enders;
    for (auto [it, end] = log.info.equal_range("tid_ender"); it != end; ++it) enders.push_back(it->second);
    ASSERT_EQ(enders.size(), 3u);

    ASSERT_EQ(r->captures.size(), 3u);
    struct Want {
        const char* mode;
        uint64_t end_tid;
        const char* graph;
    };
    const Want want[] = {{"global", main_tid, "global_graph"},
                         {"thread_local", main_tid, "local_graph"},
                         {"relaxed", enders[2], "relaxed_graph"}};
    for (size_t i = 0; i < 3; ++i) {
        const report::Capture& c = r->captures[i];
        SCOPED_TRACE(std::string("capture in mode ") + want[i].mode);
        EXPECT_STREQ(report::capture_mode_name(c.mode), want[i].mode);
        EXPECT_EQ(c.tid, main_tid);
        ASSERT_TRUE(c.t_end.has_value());
        EXPECT_EQ(c.end_error, 0) << "the refused end is not the capture's end";
        EXPECT_EQ(c.end_tid, want[i].end_tid);
        EXPECT_EQ(c.graph, std::optional<uint64_t>(log.value(want[i].graph)));
    }
    for (const auto& end : raw_records(report_for(result.pid), "c")) {
        EXPECT_NE(end[4], "908") << "a c record for the refused end";
    }
    // The capture went on: the pool segment given to it after the refusal is its own, and the
    // graph it produced is known to come from it.
    const report::Block* segment = only_block(*r, k_wrong_thread_segment);
    ASSERT_NE(segment, nullptr);
    EXPECT_EQ(segment->capture_id, 1u);
    const report::GraphExec* exec = find_exec(*r, log.value("exec"));
    ASSERT_NE(exec, nullptr);
    EXPECT_EQ(exec->capture_id, 1u);
    EXPECT_TRUE(r->hazards.warmup_retention.empty());
}

// Each thread's cudaStreamPerThread is its own stream: two threads capturing theirs at once are two
// captures, each owning what is allocated on its thread's stream and ended by its own thread.
TEST_F(CaptureMisuse, PerThreadDefaultStreamsOfTwoThreadsAreTwoStreams) {
    ChildResult result = run_compared("capture_misuse", {"per_thread_streams"});
    AppLog log = parse_app_log(result.out);
    EXPECT_EQ(log.value("distinct_graphs"), 1u);
    auto r = load_clean(result);
    ASSERT_TRUE(r);
    const uint64_t tid_a = log.value("tid_a"), tid_b = log.value("tid_b");
    ASSERT_EQ(r->captures.size(), 2u);
    struct Want {
        uint64_t tid;
        const char* graph;
        uint64_t size;
    };
    // A began first (capture 1), B second (capture 2).
    const Want want[] = {{tid_a, "graph_a", k_per_thread_a}, {tid_b, "graph_b", k_per_thread_b}};
    for (size_t i = 0; i < 2; ++i) {
        const report::Capture& c = r->captures[i];
        SCOPED_TRACE("capture " + std::to_string(c.id));
        EXPECT_EQ(c.tid, want[i].tid);
        EXPECT_EQ(c.stream, 2u) << "cudaStreamPerThread";
        ASSERT_TRUE(c.t_end.has_value());
        EXPECT_EQ(c.end_tid, want[i].tid) << "ended by the other thread?";
        EXPECT_EQ(c.graph, std::optional<uint64_t>(log.value(want[i].graph)));
        const report::Block* block = only_block(*r, want[i].size);
        ASSERT_NE(block, nullptr);
        EXPECT_EQ(block->tid, want[i].tid);
        EXPECT_EQ(block->capture_id, c.id) << "owned by the other thread's capture";
    }
}

}  // namespace
}  // namespace preload_test

// The hazards memguard reports around stream capture (W records), each against an application
// that provokes it, field by field: unsafe_call (potentially unsafe calls that CUDA's capture
// interaction modes forbid; the runtime's refusal passes through unchanged), free_live_graph (a
// capture's block freed while an exec of its graph lives), warmup_retention (memory allocated
// outside any capture and still held when a capture begins or ends, per allocation site).
#include "capture_fixture.h"

#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

constexpr int k_unsupported = 900;  // cudaErrorStreamCaptureUnsupported
constexpr int k_invalidated = 901;  // cudaErrorStreamCaptureInvalidated

/// The index of the first of `records` that `match` accepts: to check that a record lies between
/// two others in the file.
size_t position_of(const std::vector<std::vector<std::string>>& records,
                   const std::function<bool(const std::vector<std::string>&)>& match) {
    for (size_t i = 0; i < records.size(); ++i) {
        if (match(records[i])) return i;
    }
    ADD_FAILURE() << "no such record";
    return records.size();
}

// ---- unsafe_call --------------------------------------------------------------------------------

class UnsafeCalls : public CaptureTest {};

TEST_F(UnsafeCalls, ForbiddenCallsAreRefusedByTheRuntimeAndReported) {
    ChildResult result = run_compared("unsafe_calls", {});
    AppLog log = parse_app_log(result.out);
    auto r = load_clean(result);
    ASSERT_TRUE(r);
    const std::string path = report_for(result.pid);
    const uint64_t main_tid = log.value("tid_main");

    // The runtime's answers, as the program saw them (the same with and without memguard).
    for (const char* key : {"status_1", "status_2", "status_3", "status_4"}) {
        EXPECT_EQ(log.value(key), 2u) << key << ": the refused call invalidates the capture";
    }
    for (const char* key : {"status_5", "status_6", "status_7"}) EXPECT_EQ(log.value(key), 1u) << key;

    // Seven captures on one stream by the main thread; the first four invalidated.
    ASSERT_EQ(r->captures.size(), 7u);
    const char* modes[] = {"global", "global", "global", "global", "thread_local", "relaxed", "global"};
    for (size_t i = 0; i < 7; ++i) {
        const report::Capture& c = r->captures[i];
        SCOPED_TRACE("capture " + std::to_string(i + 1));
        EXPECT_EQ(c.id, i + 1);
        EXPECT_EQ(c.stream, log.value("stream"));
        EXPECT_STREQ(report::capture_mode_name(c.mode), modes[i]);
        EXPECT_EQ(c.tid, main_tid);
        ASSERT_TRUE(c.t_end.has_value());
        EXPECT_EQ(c.end_tid, main_tid);
        EXPECT_EQ(c.end_error, i < 4 ? k_invalidated : 0);
        EXPECT_EQ(c.graph.has_value(), i >= 4) << "an invalidated capture has no graph";
        EXPECT_EQ(c.t_graph_destroy.has_value(), i >= 4);
    }

    // Exactly the four forbidden calls, each naming the capture that forbids it and both modes.
    struct Want {
        const char* api;
        uint32_t capture;
        const char* capture_mode;
        const char* thread_mode;
        uint64_t tid;
    };
    const Want want[] = {
        {"cudaMalloc", 1, "global", "global", main_tid},
        {"cudaMalloc", 2, "global", "global", log.value("tid_other")},
        {"cudaFree", 3, "global", "thread_local", main_tid},
        {"cudaMallocHost", 4, "global", "global", main_tid},
    };
    ASSERT_EQ(r->hazards.unsafe_calls.size(), 4u);
    auto records = raw_records(path, "CcW");
    for (size_t i = 0; i < 4; ++i) {
        const report::UnsafeCall& u = r->hazards.unsafe_calls[i];
        SCOPED_TRACE(std::string("unsafe call #") + std::to_string(i + 1) + " " + want[i].api);
        EXPECT_EQ(u.api, want[i].api);
        EXPECT_EQ(u.capture_id, want[i].capture);
        EXPECT_STREQ(report::capture_mode_name(u.capture_mode), want[i].capture_mode);
        EXPECT_STREQ(report::capture_mode_name(u.thread_mode), want[i].thread_mode);
        EXPECT_EQ(u.tid, want[i].tid);
        // Between its capture's C and c records.
        std::string id = std::to_string(want[i].capture);
        size_t begin = position_of(records, [&](const auto& f) { return f[0] == "C" && f[3] == id; });
        size_t hazard = position_of(records, [&](const auto& f) {
            return f[0] == "W" && f[3] == "unsafe_call" && f[4] == want[i].api && f[5] == id;
        });
        size_t end = position_of(records, [&](const auto& f) { return f[0] == "c" && f[3] == id; });
        EXPECT_LT(begin, hazard);
        EXPECT_LT(hazard, end);
    }

    // The refused allocations are failed allocations with the runtime's error, at their site.
    ASSERT_EQ(r->failures.size(), 3u);
    Symbolizer symbolizer(*r);
    const std::tuple<uint64_t, const char*, uint64_t, const char*> failed[] = {
        {k_unsafe_own, "cudaMalloc", main_tid, "refused_malloc"},
        {k_unsafe_other, "cudaMalloc", log.value("tid_other"), "refused_malloc"},
        {k_unsafe_host, "cudaMallocHost", main_tid, "refused_malloc_host"},
    };
    for (size_t i = 0; i < 3; ++i) {
        const report::FailedAlloc& f = r->failures[i];
        SCOPED_TRACE(std::get<1>(failed[i]) + std::string(" of ") + std::to_string(std::get<0>(failed[i])));
        EXPECT_EQ(f.size, std::get<0>(failed[i]));
        EXPECT_EQ(f.api, std::get<1>(failed[i]));
        EXPECT_EQ(f.error, k_unsupported);
        EXPECT_FALSE(f.is_oom());
        EXPECT_EQ(f.tid, std::get<2>(failed[i]));
        EXPECT_TRUE(symbolizer.has_function(f.stack_id, std::get<3>(failed[i]))) << symbolizer.describe(f.stack_id);
    }

    // The refused cudaFree: F, then R with the runtime's error; the block is freed later.
    const report::Block* victim = only_block(*r, k_unsafe_victim);
    ASSERT_NE(victim, nullptr);
    auto restores = raw_records(path, "R");
    ASSERT_EQ(restores.size(), 1u);
    EXPECT_EQ(restores[0][3], hex(victim->addr).substr(2));
    EXPECT_EQ(restores[0][4], std::to_string(k_unsupported));
    EXPECT_TRUE(victim->t_free.has_value());

    // Allowed calls are plain allocations; only the relaxed capture's own thread's block is owned.
    for (uint64_t size :
         {k_allowed_local, k_allowed_relaxed_other, k_allowed_relaxed_mode, k_allowed_local_mode, k_unsafe_victim}) {
        const report::Block* b = only_block(*r, size);
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(b->capture_id, 0u) << size;
    }
    const report::Block* own = only_block(*r, k_allowed_relaxed_own);
    ASSERT_NE(own, nullptr);
    EXPECT_EQ(own->capture_id, 6u);
    expect_report_matches_log(*r, path, log);

    // The victim, allocated between captures 2 and 3 and live across capture 3: warm-up
    // retention at its begin and end, since the end of capture 2. Nothing else is retained.
    ASSERT_EQ(r->hazards.warmup_retention.size(), 2u);
    for (const report::WarmupRetention& w : r->hazards.warmup_retention) {
        EXPECT_EQ(w.capture_id, 3u);
        EXPECT_EQ(w.since, *r->captures[1].t_end);
        EXPECT_EQ(w.stack_id, victim->stack_id);
        EXPECT_EQ(w.blocks, 1u);
        EXPECT_EQ(w.bytes, k_unsafe_victim);
    }
    EXPECT_STREQ(report::capture_phase_name(r->hazards.warmup_retention[0].phase), "begin");
    EXPECT_STREQ(report::capture_phase_name(r->hazards.warmup_retention[1].phase), "end");
    EXPECT_TRUE(r->hazards.frees_while_graph_alive.empty());
    EXPECT_TRUE(memguard_messages(result).empty()) << result.err;
}

// ---- free_live_graph ----------------------------------------------------------------------------

class FreeLiveGraph : public CaptureTest {};

TEST_F(FreeLiveGraph, FreeingACapturesBlockWhileAnExecLivesIsReported) {
    ChildResult result = run_compared("free_live_graph", {});
    AppLog log = parse_app_log(result.out);
    auto r = load_clean(result);
    ASSERT_TRUE(r);
    const std::string path = report_for(result.pid);
    ASSERT_EQ(r->captures.size(), 1u);
    ASSERT_EQ(r->execs.size(), 2u);
    const uint64_t exec1 = log.value("exec1"), exec2 = log.value("exec2");

    const report::Block* owned_a = only_block(*r, k_flg_owned_a);
    const report::Block* owned_b = only_block(*r, k_flg_owned_b);
    const report::Block* async = only_block(*r, k_flg_async);
    const report::Block* plain = only_block(*r, k_flg_plain);
    ASSERT_TRUE(owned_a && owned_b && async && plain);
    EXPECT_EQ(owned_a->capture_id, 1u);
    EXPECT_EQ(owned_b->capture_id, 1u);
    EXPECT_EQ(async->capture_id, 1u);
    EXPECT_EQ(plain->capture_id, 0u);

    // Two hazards: owned_a (both execs alive: either may be named) and the async block (only
    // exec2 alive). Not the plain block, not owned_b (freed after both execs were destroyed).
    const auto& hazards = r->hazards.frees_while_graph_alive;
    ASSERT_EQ(hazards.size(), 2u);
    EXPECT_EQ(hazards[0].addr, owned_a->addr);
    EXPECT_EQ(hazards[0].size, k_flg_owned_a);
    EXPECT_EQ(hazards[0].capture_id, 1u);
    EXPECT_TRUE(hazards[0].exec == exec1 || hazards[0].exec == exec2) << hex(hazards[0].exec);
    EXPECT_EQ(hazards[1].addr, async->addr);
    EXPECT_EQ(hazards[1].size, k_flg_async);
    EXPECT_EQ(hazards[1].capture_id, 1u);
    EXPECT_EQ(hazards[1].exec, exec2);
    for (const auto& h : hazards) {
        EXPECT_EQ(h.tid, log.value("tid_main"));
        ASSERT_TRUE(h.block.has_value());
        EXPECT_EQ(r->blocks[*h.block].addr, h.addr);
        ASSERT_TRUE(h.exec_index.has_value());
        EXPECT_EQ(r->execs[*h.exec_index].exec, h.exec);
    }

    // Each hazard comes right after its block's F; and the frees happen where the program put them
    // relative to the execs' destruction.
    auto records = raw_records(path, "FWD");
    std::vector<std::string> order;
    for (const auto& f : records) order.push_back(f[0] == "W" ? "W " + f[4] : f[0] + " " + f[3]);
    auto a = [](uint64_t v) { return hex(v).substr(2); };
    std::vector<std::string> want = {"F " + a(owned_a->addr), "W " + a(owned_a->addr), "F " + a(plain->addr),
                                     "D " + a(exec1),         "F " + a(async->addr),   "W " + a(async->addr),
                                     "D " + a(exec2),         "F " + a(owned_b->addr)};
    EXPECT_EQ(order, want);
    expect_report_matches_log(*r, path, log);
    EXPECT_TRUE(r->hazards.unsafe_calls.empty());
    EXPECT_TRUE(r->hazards.warmup_retention.empty());
}

// ---- warmup_retention ---------------------------------------------------------------------------

class WarmupRetention : public CaptureTest {};

TEST_F(WarmupRetention, KeptWarmupOutputsAreReportedPerSiteAndWindow) {
    ChildResult result = run_compared("warmup", {});
    AppLog log = parse_app_log(result.out);
    auto r = load_clean(result);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->captures.size(), 2u);
    ASSERT_TRUE(r->captures[0].t_end.has_value());
    const int64_t first_end = *r->captures[0].t_end;

    // The sites, from the blocks' own records.
    const report::Block* kept0 = only_block(*r, warmup_output_size(0));
    const report::Block* kept2 = only_block(*r, warmup_output_size(2));
    const report::Block* freed1 = only_block(*r, warmup_output_size(1));
    const report::Block* async = only_block(*r, k_warmup_async);
    const report::Block* second = only_block(*r, k_second_kept);
    const report::Block* second_freed = only_block(*r, k_second_freed);
    ASSERT_TRUE(kept0 && kept2 && freed1 && async && second && second_freed);
    EXPECT_EQ(kept0->stack_id, kept2->stack_id) << "one call site, one stack";
    EXPECT_EQ(kept0->stack_id, freed1->stack_id);
    EXPECT_EQ(second->stack_id, second_freed->stack_id);
    EXPECT_EQ(only_block(*r, k_capture1_pool)->capture_id, 1u);
    EXPECT_EQ(only_block(*r, k_capture2_pool)->capture_id, 2u);

    Symbolizer symbolizer(*r);
    struct Site {
        uint32_t stack_id;
        const char* function;
    };
    for (const Site& site : {Site{kept0->stack_id, "warmup_outputs"}, Site{async->stack_id, "warmup_async"},
                             Site{second->stack_id, "second_warmup"}}) {
        EXPECT_TRUE(symbolizer.has_function(site.stack_id, site.function)) << symbolizer.describe(site.stack_id);
    }

    // (capture, phase) -> since, and site -> (blocks, bytes).
    using Boundary = std::pair<uint32_t, std::string>;
    std::map<Boundary, std::map<uint32_t, std::pair<uint64_t, uint64_t>>> got;
    std::map<Boundary, std::set<int64_t>> since;
    for (const report::WarmupRetention& w : r->hazards.warmup_retention) {
        Boundary b{w.capture_id, report::capture_phase_name(w.phase)};
        EXPECT_TRUE(got[b].emplace(w.stack_id, std::make_pair(w.blocks, w.bytes)).second)
            << "two records for one site at one boundary";
        since[b].insert(w.since);
        EXPECT_EQ(w.tid, log.value("tid_main"));
    }
    // Capture 1: the kept outputs (not the freed ones, not the scratch, not pinned memory, not
    // the capture's own pool segment) and the kept stream-ordered block, at its begin and its end.
    const std::map<uint32_t, std::pair<uint64_t, uint64_t>> first = {
        {kept0->stack_id, {2, warmup_output_size(0) + warmup_output_size(2)}},
        {async->stack_id, {1, k_warmup_async}},
    };
    // Capture 2: only what was allocated since capture 1 ended and is still held.
    const std::map<uint32_t, std::pair<uint64_t, uint64_t>> later = {{second->stack_id, {1, k_second_kept}}};
    const std::map<Boundary, std::map<uint32_t, std::pair<uint64_t, uint64_t>>> want = {{{1, "begin"}, first},
                                                                                        {{1, "end"}, first},
                                                                                        {{2, "begin"}, later},
                                                                                        {{2, "end"}, later}};
    EXPECT_EQ(got, want);
    EXPECT_EQ(since[Boundary(1, "begin")], std::set<int64_t>{0});
    EXPECT_EQ(since[Boundary(1, "end")], std::set<int64_t>{0});
    EXPECT_EQ(since[Boundary(2, "begin")], std::set<int64_t>{first_end}) << "the t of capture 1's c record";
    EXPECT_EQ(since[Boundary(2, "end")], std::set<int64_t>{first_end});

    expect_report_matches_log(*r, report_for(result.pid), log);
    EXPECT_TRUE(r->hazards.unsafe_calls.empty());
    EXPECT_TRUE(r->hazards.frees_while_graph_alive.empty());
}

}  // namespace
}  // namespace preload_test

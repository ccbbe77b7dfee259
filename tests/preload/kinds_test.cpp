// alloc_kinds under memguard: every allocating API, every free, the calls the runtime rejects,
// blocks live at exit; the report against the application's own log, against the fake runtime's
// counters, and the CLI reading it.
#include "log_checks.h"
#include "preload_fixture.h"

#include <sys/stat.h>

#include <algorithm>

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

class AllocKinds : public PreloadTest {
protected:
    /// Runs alloc_kinds with two devices; expects a clean exit.
    ChildResult run_app(Env env) {
        env["FAKE_CUDA_DEVICES"] = "2";
        ChildResult result = run("alloc_kinds", {}, env);
        EXPECT_EQ(result.exit_code, 0) << describe(result);
        return result;
    }
};

TEST_F(AllocKinds, RecordsEveryAllocationAndFree) {
    ChildResult result = run_app(preload_env());
    AppLog log = parse_app_log(result.out);
    ASSERT_EQ(list_dir(reports_), std::vector<std::string>{std::to_string(result.pid) + ".mgr"});
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->complete);
    EXPECT_TRUE(r->warnings.empty()) << "first warning: " << r->warnings.front();
    EXPECT_EQ(r->version, 1);
    EXPECT_EQ(r->info["pid"], std::to_string(result.pid));

    // The application logs what it did; make sure it did what the test expects before comparing.
    ASSERT_EQ(log.allocs.size(), 16u) << result.out;
    ASSERT_EQ(log.frees.size(), 12u) << result.out;
    expect_report_matches_log(*r, report_for(result.pid), log);
}

TEST_F(AllocKinds, EachApiGivesItsKindDeviceAndStream) {
    // The same facts as above, spelled out per API from the test's own constants.
    ChildResult result = run_app(preload_env());
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    struct Expected {
        size_t size;
        const char* api;
        report::Kind kind;
        int device;
        bool names_stream;
    };
    const Expected expected[] = {
        {k_device, "cudaMalloc", report::Kind::Device, 0, false},
        {k_async, "cudaMallocAsync", report::Kind::Async, 0, true},
        {k_pool, "cudaMallocFromPoolAsync", report::Kind::Async, 0, true},
        {k_managed, "cudaMallocManaged", report::Kind::Managed, 0, false},
        {1024 * k_pitch_height, "cudaMallocPitch", report::Kind::Device, 0, false},
        {k_host, "cudaMallocHost", report::Kind::Pinned, -1, false},
        {k_host_alloc, "cudaHostAlloc", report::Kind::Pinned, -1, false},
        {k_async_ptsz, "cudaMallocAsync", report::Kind::Async, 0, true},
        {k_pool_ptsz, "cudaMallocFromPoolAsync", report::Kind::Async, 0, true},
        {k_device1, "cudaMalloc", report::Kind::Device, 1, false},
        {k_leak_device, "cudaMalloc", report::Kind::Device, 0, false},
        {k_leak_managed, "cudaMallocManaged", report::Kind::Managed, 0, false},
        {k_leak_pinned, "cudaHostAlloc", report::Kind::Pinned, -1, false},
        {k_leak_async, "cudaMallocAsync", report::Kind::Async, 0, true},
    };
    for (const Expected& want : expected) {
        SCOPED_TRACE(std::string(want.api) + " of " + std::to_string(want.size) + " bytes");
        std::vector<size_t> found = blocks_of_size(*r, want.size);
        ASSERT_EQ(found.size(), 1u);
        const report::Block& block = r->blocks[found[0]];
        EXPECT_EQ(block.api, want.api);
        EXPECT_STREQ(report::kind_name(block.kind), report::kind_name(want.kind));
        EXPECT_EQ(block.device, want.device);
        EXPECT_EQ(block.stream.has_value(), want.names_stream);
    }
    // The per-thread default stream is named as the handle the call passed (0x2).
    std::vector<size_t> leak_async = blocks_of_size(*r, k_leak_async);
    ASSERT_EQ(leak_async.size(), 1u);
    EXPECT_EQ(r->blocks[leak_async[0]].stream, std::optional<uint64_t>(2));
}

TEST_F(AllocKinds, StacksContainTheAllocatingFunction) {
    ChildResult result = run_app(preload_env());
    AppLog log = parse_app_log(result.out);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    ASSERT_FALSE(log.allocs.empty());
    // The frames are in the application's executable, found through the report's module map.
    expect_stacks_name_functions(*r, log, "/" + base_name(Paths::app("alloc_kinds")));
    // memguard's own frames are removed, so the innermost frame is the function that called the
    // runtime; and the stack goes on up to main().
    Symbolizer symbolizer(*r);
    std::vector<size_t> blocks = nonnull_blocks(*r);
    for (size_t i = 0; i < std::min(blocks.size(), log.allocs.size()); ++i) {
        uint32_t stack_id = r->blocks[blocks[i]].stack_id;
        std::vector<Symbolizer::Frame> frames = symbolizer.frames(stack_id);
        ASSERT_FALSE(frames.empty());
        EXPECT_EQ(frames.front().function, log.allocs[i].function) << symbolizer.describe(stack_id);
        EXPECT_TRUE(symbolizer.has_function(stack_id, "main")) << symbolizer.describe(stack_id);
    }
    for (const report::FailedAlloc& failure : r->failures) {
        EXPECT_TRUE(symbolizer.has_function(failure.stack_id, "misuse"))
            << "failed " << failure.api << " of " << failure.size << " bytes\n"
            << symbolizer.describe(failure.stack_id);
    }
}

TEST_F(AllocKinds, RejectedCallsAreFailuresButNotOutOfMemory) {
    ChildResult result = run_app(preload_env());
    AppLog log = parse_app_log(result.out);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    ASSERT_EQ(log.failures.size(), 2u);
    ASSERT_EQ(r->failures.size(), log.failures.size());
    for (size_t i = 0; i < r->failures.size(); ++i) {
        const report::FailedAlloc& got = r->failures[i];
        const LoggedFailure& want = log.failures[i];
        SCOPED_TRACE("failure #" + std::to_string(i) + ": " + want.api + " of " + std::to_string(want.size));
        EXPECT_EQ(got.size, want.size);
        EXPECT_EQ(got.api, want.api);
        EXPECT_EQ(got.error, want.error);
        EXPECT_EQ(got.error, 1);  // cudaErrorInvalidValue
        EXPECT_FALSE(got.is_oom());
        EXPECT_STREQ(report::kind_name(got.kind), "managed");
        EXPECT_EQ(got.device, 0);
    }
    EXPECT_EQ(r->failures[0].size, k_bad_managed);
}

TEST_F(AllocKinds, RejectedFreesLeaveBlocksLiveUntilTheRightFree) {
    ChildResult result = run_app(preload_env());
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    struct Case {
        size_t size;
        const char* alloc_api;
        const char* free_api;
    };
    for (const Case& c : {Case{k_wrong_free_device, "cudaMalloc", "cudaFree"},
                          Case{k_wrong_free_host, "cudaMallocHost", "cudaFreeHost"}}) {
        SCOPED_TRACE(std::string(c.alloc_api) + " of " + std::to_string(c.size));
        std::vector<size_t> found = blocks_of_size(*r, c.size);
        ASSERT_EQ(found.size(), 1u);
        const report::Block& block = r->blocks[found[0]];
        EXPECT_EQ(block.api, c.alloc_api);
        ASSERT_TRUE(block.t_free.has_value());
        EXPECT_EQ(block.free_api, c.free_api);
        // Any free the runtime refused is undone by a restore right after it.
        int frees = 0, restores = 0;
        for (const report::Event& event : r->events) {
            if (event.block != found[0]) continue;
            if (event.type == report::Event::Free) ++frees;
            if (event.type == report::Event::Restore) {
                ++restores;
                EXPECT_EQ(frees, restores) << "a restore without a free before it";
            }
        }
        EXPECT_EQ(frees - restores, 1) << "the block must end freed exactly once";
    }
    // Frees of addresses that are not live blocks (a stack variable, a double free) are no F.
    for (const auto& record : raw_records(report_for(result.pid), "F")) {
        bool known = false;
        for (const report::Block& block : r->blocks) known = known || hex(block.addr) == "0x" + record[3];
        EXPECT_TRUE(known) << "F record for an address that was never allocated: " << record[3];
    }
}

TEST_F(AllocKinds, AgreesWithTheRuntimesOwnCounters) {
    ChildResult result = run_app(preload_env());
    AppLog log = parse_app_log(result.out);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    EXPECT_EQ(nonnull_blocks(*r).size(), log.value("fake_alloc_count"));
    EXPECT_EQ(live_gpu_bytes_at_exit(*r), log.value("fake_live_bytes"));
    EXPECT_EQ(live_pinned_bytes_at_exit(*r), log.value("fake_live_pinned_bytes"));
    EXPECT_EQ(live_gpu_bytes_at_exit(*r), k_leak_device + k_leak_managed + k_leak_async);
    EXPECT_EQ(live_pinned_bytes_at_exit(*r), k_leak_pinned);
}

TEST_F(AllocKinds, ResultsAndOutputAreThoseOfTheRuntimeAlone) {
    ChildResult plain = run_app(plain_env());
    ChildResult preloaded = run_app(preload_env());
    ASSERT_FALSE(plain.out.empty());
    EXPECT_EQ(normalize_addresses(preloaded.out), normalize_addresses(plain.out));
    EXPECT_EQ(preloaded.exit_code, plain.exit_code);
    EXPECT_TRUE(plain.err.empty()) << plain.err;
}

TEST_F(AllocKinds, MemguardEnable0IsPurePassThrough) {
    ChildResult plain = run_app(plain_env());
    Env env = preload_env();
    env["MEMGUARD_ENABLE"] = "0";
    ChildResult disabled = run_app(env);
    EXPECT_EQ(normalize_addresses(disabled.out), normalize_addresses(plain.out));
    EXPECT_EQ(disabled.exit_code, plain.exit_code);
    EXPECT_TRUE(lines_starting_with(disabled.err, "memguard:").empty()) << disabled.err;
    EXPECT_TRUE(find_reports(dir_->path()).empty()) << "MEMGUARD_ENABLE=0 wrote a report";
}

TEST_F(AllocKinds, ReportIsNotWorldWritable) {
    Env env = preload_env();
    ChildOptions o = options("alloc_kinds", {}, env);
    o.env["FAKE_CUDA_DEVICES"] = "2";
    o.umask = 0;  // whatever mode memguard asks for is what the file gets
    ChildResult result = run_child(o);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    struct stat st;
    ASSERT_EQ(stat(report_for(result.pid).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & S_IWOTH, 0u) << "mode " << std::oct << (st.st_mode & 07777);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << "docs/report-format.md: mode 0640";
}

// The CLI reads the report the library wrote and names the leaking function.
TEST_F(AllocKinds, CliSummaryAndTopReadTheReport) {
    ChildResult result = run_app(preload_env());
    std::string path = report_for(result.pid);
    ASSERT_TRUE(exists(path));
    ChildOptions cli;
    cli.env = plain_env();
    cli.cwd = work_;

    cli.argv = {Paths::memguard_cli(), "summary", path, "--json"};
    ChildResult summary = run_child(cli);
    EXPECT_EQ(summary.exit_code, 0) << describe(summary);
    EXPECT_NE(summary.out.find(std::to_string(k_leak_device + k_leak_managed + k_leak_async)), std::string::npos)
        << "the summary does not show the GPU bytes live at exit:\n"
        << summary.out;

    cli.argv = {Paths::memguard_cli(), "top", path, "--at", "exit", "--json"};
    ChildResult top = run_child(cli);
    EXPECT_EQ(top.exit_code, 0) << describe(top);
    EXPECT_NE(top.out.find("leak_blocks"), std::string::npos)
        << "top --at exit does not name the function holding the live blocks:\n"
        << top.out;

    cli.argv = {Paths::memguard_cli(), "top", path};
    ChildResult top_text = run_child(cli);
    EXPECT_EQ(top_text.exit_code, 0) << describe(top_text);
}

}  // namespace
}  // namespace preload_test

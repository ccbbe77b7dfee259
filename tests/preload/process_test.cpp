// Process life cycles under memguard: a runtime loaded with RTLD_LOCAL, fork, fork+exec, SIGKILL,
// a process that never allocates, and exit codes.
#include "log_checks.h"
#include "preload_fixture.h"

#include <signal.h>

#include <algorithm>

#include <chrono>
#include <thread>

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

/// Sizes of the blocks of a report, as a sorted list.
std::vector<uint64_t> sizes_of(const report::Report& r) {
    std::vector<uint64_t> sizes;
    for (size_t i : nonnull_blocks(r)) sizes.push_back(r.blocks[i].size);
    std::sort(sizes.begin(), sizes.end());
    return sizes;
}

// ---- libmemguard.so loaded with dlopen, not preloaded ---------------------------------------------

class DlopenMemguard : public PreloadTest {};

// Allocator mode by hand (torch.cuda.memory.CUDAPluggableAllocator) dlopen()s the library into a
// running process; its initial-exec thread-local data must fit glibc's static TLS surplus.
TEST_F(DlopenMemguard, LoadsIntoARunningProgram) {
    ChildResult result = run("dlopen_memguard", {Paths::memguard_lib()}, plain_env());
    EXPECT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_starting_with(result.out, "result dlopen 0").size(), 1u) << result.out << describe(result);
    EXPECT_EQ(lines_starting_with(result.out, "info nvtx_env unset").size(), 1u) << result.out;
}

// ---- dlopen(RTLD_LOCAL) -------------------------------------------------------------------------

class DlopenLocal : public PreloadTest {};

TEST_F(DlopenLocal, PluginAllocationsAreRecorded) {
    // The premise: the program itself does not link the runtime.
    ElfFile program = ElfFile::load(Paths::app("dlopen_local"));
    for (const std::string& needed : program.needed()) {
        ASSERT_EQ(needed.find("libcudart"), std::string::npos) << "dlopen_local links " << needed;
    }

    ChildResult result = run("dlopen_local", {Paths::dl_worker()}, preload_env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    AppLog log = parse_app_log(result.out);
    // ... and the runtime stays out of the global scope after the dlopen().
    EXPECT_EQ(log.value("cudart_global_before"), 0u);
    EXPECT_EQ(log.value("cudart_global_after"), 0u);
    ASSERT_EQ(log.allocs.size(), 3u) << result.out;

    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->complete);
    expect_report_matches_log(*r, report_for(result.pid), log);
    // The plugin, loaded after start-up, is in the module map and names its functions.
    expect_stacks_name_functions(*r, log, "/" + base_name(Paths::dl_worker()));
    EXPECT_EQ(live_gpu_bytes_at_exit(*r), k_dl_live);
}

// ---- fork ---------------------------------------------------------------------------------------

class Fork : public PreloadTest {
protected:
    void check_fork(const std::string& mode, bool child_exits_cleanly) {
        ChildResult result = run("fork", {mode}, preload_env());
        ASSERT_EQ(result.exit_code, 0) << describe(result);
        AppLog log = parse_app_log(result.out);
        const pid_t parent = result.pid;
        const auto child = static_cast<pid_t>(log.value("child_pid"));
        ASSERT_EQ(log.value("parent_pid"), static_cast<uint64_t>(parent));
        ASSERT_NE(child, parent);

        std::vector<std::string> want_files = {std::to_string(parent) + ".mgr", std::to_string(child) + ".mgr"};
        std::sort(want_files.begin(), want_files.end());
        EXPECT_EQ(list_dir(reports_), want_files);

        // The parent's file is intact: its own blocks, each once, nothing of the child's.
        auto parent_report = load(report_for(parent));
        ASSERT_TRUE(parent_report);
        EXPECT_TRUE(parent_report->complete);
        EXPECT_TRUE(parent_report->warnings.empty()) << "first warning: " << parent_report->warnings.front();
        EXPECT_EQ(parent_report->info["pid"], std::to_string(parent));
        EXPECT_EQ(sizes_of(*parent_report), (std::vector<uint64_t>{k_parent_before_fork, k_parent_after_fork}));
        EXPECT_EQ(live_gpu_bytes_at_exit(*parent_report), 0u);

        // The child's file is its own.
        auto child_report = load(report_for(child));
        ASSERT_TRUE(child_report);
        EXPECT_EQ(child_report->info["pid"], std::to_string(child));
        EXPECT_EQ(child_report->info["ppid"], std::to_string(parent));
        if (child_exits_cleanly) {
            EXPECT_TRUE(child_report->complete);
        }
        std::vector<size_t> child_blocks = blocks_of_size(*child_report, k_child);
        ASSERT_EQ(child_blocks.size(), 1u) << "the child's allocation is missing";
        const report::Block& block = child_report->blocks[child_blocks[0]];
        EXPECT_FALSE(block.t_free.has_value());
        Symbolizer symbolizer(*child_report);
        EXPECT_TRUE(symbolizer.has_function(block.stack_id, "child_alloc")) << symbolizer.describe(block.stack_id);
        EXPECT_TRUE(blocks_of_size(*child_report, k_parent_after_fork).empty())
            << "the child's report holds the parent's allocation made after fork()";
    }
};

TEST_F(Fork, ChildEndingWithExitWritesItsOwnReport) { check_fork("exit", true); }

TEST_F(Fork, ChildEndingWithUnderscoreExitAfterAFlushWritesItsOwnReport) { check_fork("_exit", false); }

// ---- fork + exec --------------------------------------------------------------------------------

class ForkExec : public PreloadTest {};

TEST_F(ForkExec, ExecedChildWritesItsOwnReport) {
    ChildResult result = run("fork_exec", {Paths::app("exit_code")}, preload_env());
    ASSERT_EQ(result.exit_code, 0) << "the exec()ed child's exit code was not kept\n" << describe(result);
    AppLog log = parse_app_log(result.out);
    const pid_t parent = result.pid;
    const auto child = static_cast<pid_t>(log.value("child_pid"));

    std::vector<std::string> want_files = {std::to_string(parent) + ".mgr", std::to_string(child) + ".mgr"};
    std::sort(want_files.begin(), want_files.end());
    EXPECT_EQ(list_dir(reports_), want_files);

    auto parent_report = load(report_for(parent));
    ASSERT_TRUE(parent_report);
    EXPECT_TRUE(parent_report->complete);
    EXPECT_EQ(sizes_of(*parent_report), std::vector<uint64_t>{k_parent_before_fork});

    auto child_report = load(report_for(child));
    ASSERT_TRUE(child_report);
    EXPECT_TRUE(child_report->complete);
    EXPECT_EQ(child_report->info["pid"], std::to_string(child));
    EXPECT_EQ(base_name(child_report->info["exe"]), base_name(Paths::app("exit_code")));
    EXPECT_EQ(sizes_of(*child_report), (std::vector<uint64_t>{k_exec_child, k_exec_child_pinned}));
    EXPECT_EQ(live_gpu_bytes_at_exit(*child_report), k_exec_child);
}

// ---- SIGKILL ------------------------------------------------------------------------------------

class Killed : public PreloadTest {};

TEST_F(Killed, SigkillLeavesALoadableIncompleteReport) {
    Child child(options("killed", {}, preload_env()));
    ASSERT_TRUE(child.wait_for_stdout("ready", 20'000)) << "killed never got ready";
    // memguard flushes at least once a second.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    child.kill(SIGKILL);
    ChildResult result = child.finish();
    ASSERT_EQ(result.term_signal, SIGKILL) << describe(result);
    AppLog log = parse_app_log(result.out);
    ASSERT_EQ(log.allocs.size(), 4u) << result.out;

    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->complete);
    expect_report_matches_log(*r, report_for(result.pid), log);
    expect_stacks_name_functions(*r, log);
}

// ---- no allocation, no report -------------------------------------------------------------------

class Noop : public PreloadTest {};

TEST_F(Noop, LeavesNoReportAnywhere) {
    ChildResult plain = run("noop", {}, plain_env());
    ASSERT_EQ(plain.exit_code, 0) << describe(plain);

    // With an output template, and with the default name in the working directory.
    ChildResult templated = run("noop", {}, preload_env());
    Env default_name = preload_env();
    default_name.erase("MEMGUARD_OUTPUT");
    ChildResult defaulted = run("noop", {}, default_name);
    for (const ChildResult* result : {&templated, &defaulted}) {
        EXPECT_EQ(result->exit_code, 0) << describe(*result);
        EXPECT_EQ(result->out, plain.out);
    }
    EXPECT_TRUE(list_dir(reports_).empty());
    EXPECT_TRUE(list_dir(work_).empty());
}

// ---- exit codes ---------------------------------------------------------------------------------

class ExitCode : public PreloadTest {};

TEST_F(ExitCode, IsKeptWhicheverWayTheProgramEnds) {
    for (const char* mode : {"return", "exit", "_exit"}) {
        SCOPED_TRACE(std::string("exit_code ") + mode);
        ChildResult plain = run("exit_code", {mode}, plain_env());
        ChildResult preloaded = run("exit_code", {mode}, preload_env());
        EXPECT_EQ(plain.exit_code, k_exit_code) << describe(plain);
        EXPECT_EQ(preloaded.exit_code, k_exit_code) << describe(preloaded);
        EXPECT_EQ(normalize_addresses(preloaded.out), normalize_addresses(plain.out));
        if (std::string(mode) != "_exit") {
            auto r = load(report_for(preloaded.pid));
            ASSERT_TRUE(r);
            EXPECT_TRUE(r->complete);
            EXPECT_EQ(sizes_of(*r), (std::vector<uint64_t>{k_exec_child, k_exec_child_pinned}));
        }
    }
}

// A process that ends with _exit before the writer's first flush used to leave an empty file,
// which the reader refuses. The header is written when the file is created, so the report reads
// (without its end record, as after SIGKILL) and the CLI takes it.
TEST_F(ExitCode, UnderscoreExitBeforeTheFirstFlushLeavesAReadableReport) {
    ChildResult result = run("exit_code", {"_exit"}, preload_env());
    ASSERT_EQ(result.exit_code, k_exit_code) << describe(result);
    const std::string path = report_for(result.pid);
    ASSERT_TRUE(exists(path)) << ::testing::PrintToString(list_dir(reports_));
    EXPECT_FALSE(read_file(path).empty()) << "the report is empty";
    auto r = load(path);
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->complete);
    EXPECT_EQ(r->info["pid"], std::to_string(result.pid));
    EXPECT_EQ(base_name(r->info["exe"]), base_name(Paths::app("exit_code")));

    ChildOptions cli;
    cli.argv = {Paths::memguard_cli(), "summary", path};
    cli.env = plain_env();
    cli.cwd = work_;
    ChildResult summary = run_child(cli);
    EXPECT_EQ(summary.exit_code, 0) << describe(summary);
    EXPECT_NE((summary.out + summary.err).find("no end record"), std::string::npos) << summary.out << summary.err;
}

}  // namespace
}  // namespace preload_test

// A bounded report's follower (docs/bounded-reports.md, "The follower"): libmemguard.so starts
// `memguard compact --follow --detach REPORT` at the report's first new part; the follower folds
// the parts as they close, so that the parts the writer deletes keep their figures, and it is no
// child of the host, has neither LD_PRELOAD nor MEMGUARD_* in its environment, and exits after the
// run.
#include "log_checks.h"
#include "preload_fixture.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "report/detail_parts.h"
#include "report/fold.h"
#include "report/stream.h"

namespace preload_test {
namespace {

namespace report = memguard::report;

// About 2.8 MiB of text detail against a 1 MiB limit (parts of 128 KiB), at about 0.5 MiB a second:
// a part closes every 250 ms or so, and the writer keeps about 6 closed parts: the follower has more
// than a second to fold each before it goes (on a busy machine too).
const std::vector<std::string> kChurn = {"20000", "200", "50"};

class BoundedFollower : public PreloadTest {
protected:
    Env bounded_env() const {
        Env env = preload_env();
        env["MEMGUARD_MAX_REPORT_SIZE"] = "1MiB";
        env["MEMGUARD_REPORT_ENCODING"] = "text";
        env["MEMGUARD_CLI"] = Paths::memguard_cli();
        return env;
    }
};

/// Whether process `pid` runs (a zombie does not).
bool running(pid_t pid) {
    if (pid <= 0 || kill(pid, 0) != 0) return false;
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

/// What `summary` and `top --at peak` are made of, streamed: the counts, the peak and the blocks
/// live at it (their sizes: addresses and times differ between runs).
struct Figures {
    uint64_t allocations = 0, frees = 0, peak = 0, exit = 0;
    std::vector<uint64_t> at_peak;
    uint64_t dropped = 0, folded = 0;
    bool operator==(const Figures& o) const {
        return allocations == o.allocations && frees == o.frees && peak == o.peak && exit == o.exit &&
               at_peak == o.at_peak;
    }
};

Figures figures_of(const std::string& path) {
    report::SummaryBuilder builder;
    report::PeakObserver peaks;
    report::Observers all({&builder, &peaks});
    const report::Report r = report::stream_report(path, all);
    const report::Summary s = builder.take(r);
    Figures f;
    f.allocations = s.allocations, f.frees = s.frees, f.peak = s.peak_bytes, f.exit = s.live_bytes_at_exit;
    f.dropped = r.detail_dropped, f.folded = r.detail_folded;
    if (peaks.has(false, s.peak_events)) {
        report::LiveSet live;
        const report::Report point = peaks.take(false, report::Report{}, 0, live);
        for (const report::Block& b : point.blocks) f.at_peak.push_back(b.size);
        std::sort(f.at_peak.begin(), f.at_peak.end());
    }
    return f;
}

uint64_t bytes_of(const std::string& dir) {
    uint64_t total = 0;
    for (const std::string& name : list_dir(dir)) total += read_file(dir + "/" + name).size();
    return total;
}

TEST_F(BoundedFollower, FoldsThePartsAsTheyCloseAndLeavesNothingToTheHost) {
    ChildResult result = run("bounded_churn", kChurn, bounded_env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    const AppLog log = parse_app_log(result.out);
    const pid_t follower = static_cast<pid_t>(log.value("follower_pid"));
    ASSERT_GT(follower, 0) << "no follower ran during the run\n" << describe(result);
    EXPECT_EQ(log.value("follower_is_child"), 0u) << "the follower is the host's child";
    EXPECT_EQ(log.value("follower_ld_preload"), 0u) << "LD_PRELOAD reached the follower";
    EXPECT_EQ(log.value("follower_memguard_env"), 0u) << "a MEMGUARD_* variable reached the follower";
    EXPECT_EQ(log.value("inherited_pipe_closed"), 1u) << "the follower holds a descriptor the host left open";
    // A host's wait() meets nothing: the spawned child was reaped, the follower is not its child.
    EXPECT_EQ(log.value("wait_child"), 0u);
    EXPECT_EQ(log.value("wait_errno"), static_cast<uint64_t>(ECHILD));
    // The follower ends after the run (the test's reading of the host's stderr waited for it).
    for (int i = 0; i < 100 && running(follower); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(running(follower)) << "the follower still runs after the run";
    EXPECT_EQ(lines_containing(result.err, "memguard: error").size(), 0u) << result.err;

    const std::string path = report_for(result.pid);
    const std::vector<unsigned> parts = report::detail_part_numbers(path);
    ASSERT_FALSE(parts.empty());
    EXPECT_GT(parts.front(), 1u) << "the run was meant to go far over its limit";
    EXPECT_LE(bytes_of(reports_), uint64_t{1} << 20);
    ASSERT_FALSE(report::find_folds(path).empty()) << "no fold beside the report";

    // The same run unbounded: the figures of `summary` and `top --at peak` are its.
    Env plain = preload_env("whole.mgr");
    plain["MEMGUARD_REPORT_ENCODING"] = "text";
    ChildResult whole = run("bounded_churn", {kChurn[0], "0", "0"}, plain);  // the same pairs, unpaced
    ASSERT_EQ(whole.exit_code, 0) << describe(whole);
    EXPECT_EQ(parse_app_log(whole.out).value("follower_pid"), 0u);
    const Figures bounded_figures = figures_of(path), whole_figures = figures_of(reports_ + "/whole.mgr");
    EXPECT_TRUE(bounded_figures == whole_figures)
        << "allocations " << bounded_figures.allocations << " / " << whole_figures.allocations << ", peak "
        << bounded_figures.peak << " / " << whole_figures.peak << ", blocks at the peak "
        << bounded_figures.at_peak.size() << " / " << whole_figures.at_peak.size();
    EXPECT_EQ(bounded_figures.dropped, 0u) << "a part was deleted unfolded";
    EXPECT_GT(bounded_figures.folded, 0u);
}

TEST_F(BoundedFollower, MemguardFoldZeroStartsNoneAndThePartsGoUnfolded) {
    Env env = bounded_env();
    env["MEMGUARD_FOLD"] = "0";
    ChildResult result = run("bounded_churn", {"20000", "0", "0"}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(parse_app_log(result.out).value("follower_pid"), 0u);
    const std::string path = report_for(result.pid);
    EXPECT_TRUE(report::find_folds(path).empty());
    EXPECT_GT(report::detail_part_numbers(path).front(), 1u);
    EXPECT_GT(figures_of(path).dropped, 0u);
}

TEST_F(BoundedFollower, WithoutTheProgramItSaysSoOnceAndThePartsGoUnfolded) {
    Env env = bounded_env();
    env["MEMGUARD_CLI"] = dir_->path() + "/no-memguard";
    ChildResult result = run("bounded_churn", {"20000", "0", "0"}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    const std::vector<std::string> said = lines_containing(result.err, "no follower to fold its detail parts");
    ASSERT_EQ(said.size(), 1u) << result.err;
    EXPECT_NE(said[0].find("MEMGUARD_CLI=" + dir_->path() + "/no-memguard is not an executable file"),
              std::string::npos)
        << said[0];
    EXPECT_TRUE(report::find_folds(report_for(result.pid)).empty());
}

}  // namespace
}  // namespace preload_test

// The memguard executable end to end, on reports written at run time (the golden tests cover the
// checked-in ones): symbolized frames of a real module, --help, --version and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

#include "loaded_module.h"
#include "report/subprocess.h"
#include "symtest_lib.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::contains;

using Result = test::CliResult;
using test::run_cli;

std::string symtest_report(test::TempDir& dir) {
    void* ip = memguard_symtest::known_function(7);
    auto m = test::module_of(ip);
    if (!m) throw std::runtime_error("module not found");
    char s[64];
    std::snprintf(s, sizeof s, "S 1 %llx\n", static_cast<unsigned long long>(reinterpret_cast<uint64_t>(ip)));
    return dir.write("sym.mgr", test::kHeader + "I pid 1\n" + m->m_record(0) + s +
                                    "A 1 1 7f00 4096 device cudaMalloc 0 - 1\nZ 2\n");
}

TEST(Cli, TopShowsSymbolizedFramesOfARealModule) {
    test::TempDir dir;
    std::string path = symtest_report(dir);
    Result text = run_cli("top '" + path + "'");
    ASSERT_EQ(text.rc, 0) << text.out;
    std::string expected = "#0  memguard_symtest::known_function(int)";
    EXPECT_TRUE(contains(text.out, expected)) << text.out;
    EXPECT_TRUE(contains(text.out, "(libmemguard_symtest.so)")) << text.out;
    if (!find_program("addr2line").empty()) {
        std::string line = "symtest_lib.cpp:" + std::to_string(memguard_symtest::known_call_line()) + " (";
        EXPECT_TRUE(contains(text.out, line)) << text.out;
    }
    Result json = run_cli("top --json '" + path + "'");
    ASSERT_EQ(json.rc, 0) << json.out;
    EXPECT_TRUE(contains(json.out, "\"function\": \"memguard_symtest::known_function(int)\"")) << json.out;
    EXPECT_TRUE(contains(json.out, "\"total_bytes\": 4096")) << json.out;
}

TEST(Cli, EmptyMemguardAddr2lineDisablesFileAndLine) {
    test::TempDir dir;
    std::string path = symtest_report(dir);
    Result r = run_cli("top --json '" + path + "'", "MEMGUARD_ADDR2LINE=");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "\"function\": \"memguard_symtest::known_function(int)\""));
    EXPECT_TRUE(contains(r.out, "\"file\": null"));
}

TEST(Cli, HelpAndVersion) {
    for (const char* args : {"--help", "help", "-h"}) {
        Result r = run_cli(args);
        EXPECT_EQ(r.rc, 0) << args;
        EXPECT_TRUE(contains(r.out, "memguard summary FILE [--json]")) << args;
        EXPECT_TRUE(contains(r.out, "memguard top FILE")) << args;
    }
    Result top = run_cli("help top");
    EXPECT_EQ(top.rc, 0);
    EXPECT_TRUE(contains(top.out, "--frames K"));
    Result top2 = run_cli("top --help");
    EXPECT_EQ(top2.out, top.out);
    for (const char* cmd : {"graphs", "hazards", "cycles"}) {
        Result help = run_cli(std::string("help ") + cmd);
        EXPECT_EQ(help.rc, 0) << cmd;
        EXPECT_EQ(help.out.rfind(std::string("usage: memguard ") + cmd + " FILE", 0), 0u) << help.out;
        EXPECT_EQ(run_cli(std::string(cmd) + " --help").out, help.out) << cmd;
        EXPECT_TRUE(contains(run_cli("--help").out, std::string("memguard ") + cmd + " FILE")) << cmd;
    }
    EXPECT_TRUE(contains(run_cli("help top").out, "--pool"));
    EXPECT_TRUE(contains(run_cli("help cycles").out, "--all"));
    EXPECT_TRUE(contains(run_cli("help hazards").out, "--frames K"));
    Result check = run_cli("help check");
    EXPECT_EQ(check.rc, 0);
    EXPECT_EQ(check.out.rfind("usage: memguard check FILE [--max-peak SIZE]", 0), 0u) << check.out;
    EXPECT_EQ(run_cli("check --help").out, check.out);
    EXPECT_TRUE(contains(run_cli("--help").out, "memguard check FILE [--max-peak SIZE]"));
    EXPECT_TRUE(contains(run_cli("help diff").out, "--fail-if EXPR"));
    Result v = run_cli("--version");
    EXPECT_EQ(v.rc, 0);
    EXPECT_EQ(v.out, std::string("memguard ") + MEMGUARD_VERSION_STRING + " (reads report format 1)\n");
}

// plot's usage lists --frames K, but the option was refused ("unknown option '--frames' for
// 'plot'"); it chooses how many frames describe the peak's site.
TEST(Cli, PlotTakesFrames) {
    test::TempDir dir;
    std::string path = dir.write("f.mgr", test::kHeader +
                                              "S 1 7f00 7f10\nA 1 9 7f0000000000 4096 device cudaMalloc 0 - 1\nZ 2\n");
    Result all = run_cli("plot '" + path + "' -o - 2>/dev/null");
    ASSERT_EQ(all.rc, 0) << all.out;
    EXPECT_TRUE(contains(all.out, "largest site: 0x7f00 (4.00 KiB, 100.0%)")) << all.out;
    for (const char* frames : {"--frames 0", "--frames=0"}) {
        Result none = run_cli("plot '" + path + "' -o - " + frames + " 2>/dev/null");
        ASSERT_EQ(none.rc, 0) << frames << ": " << none.out;
        EXPECT_TRUE(contains(none.out, "largest site: (stack 1) (4.00 KiB, 100.0%)")) << frames << ": " << none.out;
        EXPECT_FALSE(contains(none.out, "0x7f00")) << frames;
    }
    Result bad = run_cli("plot '" + path + "' -o - --frames x");
    EXPECT_EQ(bad.rc, 2);
    EXPECT_EQ(bad.out.rfind("memguard: error: bad value 'x' for --frames: expected a whole number >= 0\n", 0), 0u)
        << bad.out;
}

// The help of plot and export says where -o can write: '-', devices, FIFOs and /dev/stdout are
// written in place, other files replaced through a temporary file (output.h, write_output_file).
TEST(Cli, PlotAndExportHelpSayWhereOutputGoes) {
    for (const char* cmd : {"plot", "export"}) {
        Result help = run_cli(std::string("help ") + cmd);
        ASSERT_EQ(help.rc, 0) << cmd;
        for (const char* text :
             {"-o - writes to standard output", "/dev/stdout", "device or FIFO of yours or of root",
              "(/dev/null, a named pipe) is written in place", "symbolic link", "Refused: a directory"}) {
            EXPECT_TRUE(contains(help.out, text)) << cmd << ": no '" << text << "' in\n" << help.out;
        }
    }
    Result plot = run_cli("help plot");
    EXPECT_TRUE(contains(plot.out, "usage: memguard plot FILE -o OUT.svg|OUT.html|- [--format svg|html] [--frames K]"));
    EXPECT_TRUE(contains(plot.out, "  --format svg|html\n")) << plot.out;
    EXPECT_TRUE(contains(run_cli("help").out, "memguard plot FILE -o OUT.svg|OUT.html|- [--format svg|html]"));
}

TEST(Cli, UsageErrorsExitWithTwoAndAHint) {
    for (const char* args : {"",
                             "frob",
                             "summary",
                             "top x.mgr --at",
                             "top x.mgr -n x",
                             "top x.mgr --kind cpu",
                             "summary x.mgr --json=1",
                             "summary a.mgr b.mgr",
                             "help nothing",
                             "--version x",
                             "top x.mgr --frames -1",
                             "--bogus",
                             "graphs",
                             "graphs x.mgr --all",
                             "hazards x.mgr --pool",
                             "hazards x.mgr --frames",
                             "hazards x.mgr --frames x",
                             "cycles x.mgr --all=1",
                             "cycles x.mgr --explain --all",
                             "cycles x.mgr --explain=1",
                             "top x.mgr --pool=1",
                             "top x.mgr --since soon",
                             "graphs a.mgr b.mgr",
                             "help graph",
                             "check",
                             "check x.mgr",
                             "check x.mgr y.mgr --no-oom",
                             "check x.mgr --max-peak",
                             "check x.mgr --max-peak 2G",
                             "check x.mgr --max-peak=-1GiB",
                             "check x.mgr --max-gc-freed 1e9",
                             "check x.mgr --no-hazards=1",
                             "check x.mgr --frames 2 --no-oom",
                             "diff a.mgr b.mgr --fail-if",
                             "diff a.mgr b.mgr --fail-if peak",
                             "diff a.mgr b.mgr --fail-if 'peak>+5%,oom>0'",
                             "diff a.mgr b.mgr --fail-if 'oom>+1MiB'",
                             "diff a.mgr b.mgr --fail-if 'phase[x].exit>1'",
                             "summary x.mgr --fail-if 'peak>1'",
                             "summary x.mgr --max-peak 1GiB"}) {
        Result r = run_cli(args);
        EXPECT_EQ(r.rc, 2) << args;
        EXPECT_EQ(r.out.rfind("memguard: error: ", 0), 0u) << args << ": " << r.out;
        EXPECT_TRUE(contains(r.out, "\nusage: memguard ")) << args << ": " << r.out;
        EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << args << ": " << r.out;
    }
}

TEST(Cli, OptionFormsAndDoubleDash) {
    test::TempDir dir;
    dir.write("-odd name.mgr", test::kHeader + "A 1 1 7f00 10 device m 0 - 0\nZ 1000000000\n");
    Result r = run_cli("top --at=exit --kind=gpu --frames=0 -n 1 -- '-odd name.mgr'", "cd '" + dir.path() + "' &&");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "Live GPU memory at exit (t=1.000 s): 10 B in 1 block from 1 site")) << r.out;
}

TEST(Cli, TopSinceKeepsWhatWasAllocatedFromThatTime) {
    test::TempDir dir;
    // 100 B before t=2 s (live throughout), then 20 B and 3 B from t=2 s; the 3 B freed at t=4 s.
    const std::string body = "A 1000000000 1 7f00 100 device m 0 - 0\n"
                             "A 2000000000 1 8f00 20 device m 0 - 0\n"
                             "A 3000000000 1 9f00 3 device m 0 - 0\n"
                             "F 4000000000 1 9f00 3 cudaFree -\nZ 5000000000\n";
    const std::string path = dir.write("since.mgr", test::kHeader + body);
    Result all = run_cli("top '" + path + "' --at 3.5 --frames 0");
    EXPECT_TRUE(contains(all.out, "at t=3.500 s: 123 B in 3 blocks")) << all.out;
    Result since = run_cli("top '" + path + "' --at 3.5 --since 2 --frames 0");
    ASSERT_EQ(since.rc, 0) << since.out;
    EXPECT_TRUE(contains(since.out, "at t=3.500 s, allocated since 2.000 s: 23 B in 2 blocks")) << since.out;
    Result exit = run_cli("top '" + path + "' --at exit --since 2.0 --json");
    EXPECT_TRUE(contains(exit.out, "\"since_s\": 2")) << exit.out;
    EXPECT_TRUE(contains(exit.out, "\"total_bytes\": 20")) << exit.out;
    Result later = run_cli("top '" + path + "' --at peak --since 4.5");
    EXPECT_TRUE(contains(later.out, "nothing live")) << later.out;
}

TEST(Cli, GarbageFilesNeverCrashTheCli) {
    test::TempDir dir;
    std::string inputs[] = {std::string("\0\0\0", 3), "MEMGUARD-REPORT 1\n\xff\xfe\n", "MEMGUARD-REPORT 1\nA\n",
                            "MEMGUARD-REPORT 1\nI format_minor 2\nW 1 2 free_live_graph 0 0 1 0\nL 1 1 0 0\n"
                            "Y 1 1 memguard 0 0 0 0 - , -\nP 1 0 0\nA 1 1 0 0 pinned m -1 - 0 3 1\n",
                            "MEMGUARD-REPORT 1\nS 1 " + std::string(5000, 'f') + "\n"};
    for (const std::string& in : inputs) {
        std::string path = dir.write("g.mgr", in);
        for (const char* cmd : {"summary", "top", "top --json", "summary --json", "top --pool", "graphs",
                                "graphs --json", "hazards", "hazards --json", "cycles", "cycles --json"}) {
            Result r = run_cli(std::string(cmd) + " '" + path + "'");
            EXPECT_TRUE(r.rc == 0 || r.rc == 2) << cmd << ": " << r.out;
            if (r.rc == 2) {
                EXPECT_EQ(r.out.rfind("memguard: error: ", 0), 0u) << r.out;
            }
        }
    }
}

TEST(Cli, NewCommandsOnAReportWithoutTheirRecords) {
    test::TempDir dir;
    std::string path = dir.write("old.mgr", test::kHeader + "I format_minor 0\nA 1 1 7f00 10 device m 0 - 0\nZ 2\n");
    EXPECT_EQ(run_cli("graphs '" + path + "'").out, "no stream captures (format 1.0 does not record them)\n");
    EXPECT_EQ(run_cli("hazards '" + path + "'").out, "no hazards (format 1.0 does not record them)\n");
    Result cycles = run_cli("cycles '" + path + "'");
    EXPECT_EQ(cycles.rc, 0);
    EXPECT_EQ(cycles.out.rfind("no garbage collections (format 1.0 does not record them)\n", 0), 0u) << cycles.out;
    EXPECT_EQ(run_cli("graphs --json '" + path + "'").out, "[]\n");
}

TEST(Cli, WarningsGoToStderrAndKeepExitZero) {
    test::TempDir dir;
    std::string path = dir.write("inc.mgr", test::kHeader + "A 1 1 7f00 10 device m 0 - 0\nH 2000000000\n");
    std::string cmd = "'" + test::cli_path() + "' summary '" + path + "' 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    std::string out(buf, fread(buf, 1, sizeof buf, p));
    int status = pclose(p);
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_FALSE(contains(out, "warning"));
    Result both = run_cli("summary '" + path + "'");
    EXPECT_EQ(both.out.rfind("memguard: warning: " + path + ": no end record", 0), 0u) << both.out;
}

// A report with lost records (U, minor 6) says so in every command (a warning) and in summary.
TEST(Cli, LostRecordsAreNamedBySummaryAndWarnedByEveryCommand) {
    test::TempDir dir;
    std::string path = dir.write("lost.mgr", test::kHeader +
                                                 "I format_minor 6\nA 1000 7 a000 4096 device cudaMalloc 0 - 0 0 0\n"
                                                 "U 3000000000 2000000000 12\nZ 4000000000\n");
    Result text = run_cli("summary '" + path + "'");
    ASSERT_EQ(text.rc, 0) << text.out;
    EXPECT_TRUE(contains(text.out, "complete, 12 records lost)")) << text.out;
    EXPECT_TRUE(contains(text.out, "lost 12 record(s) between t=2.000 s and t=3.000 s")) << text.out;
    Result json = run_cli("summary --json '" + path + "'");
    ASSERT_EQ(json.rc, 0) << json.out;
    EXPECT_TRUE(contains(json.out, "\"lost_records\": 12")) << json.out;
    Result top = run_cli("top '" + path + "'");
    ASSERT_EQ(top.rc, 0) << top.out;
    EXPECT_TRUE(contains(top.out, "lost 12 record(s)")) << top.out;
}

}  // namespace
}  // namespace memguard::report

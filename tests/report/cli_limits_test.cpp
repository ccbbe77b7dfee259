// The memguard CLI on hostile reports (issue 17): every command, run as the real binary in a child
// under a memory limit (RLIMIT_AS) and an alarm, over small reports that ask for something absurd.
// Each must end promptly with its exit status and, when it refuses, one line naming the problem;
// its memory stays a small multiple of what the records need and its output stays small.
//
// MEMGUARD_TEST_CLI runs the tests against another memguard binary (say an older build).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <dlfcn.h>
#include <exception>
#include <fstream>
#include <vector>

#include "loaded_module.h"
#include "report/report.h"
#include "report/subprocess.h"
#include "symtest_lib.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMGUARD_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MEMGUARD_TEST_SANITIZED 1
#endif
#endif

namespace memguard::report {
namespace {

using test::contains;
using test::kHeader;

// The CLI may use 1 GiB of address space (RLIMIT_AS; the binary itself needs a few tens of MiB)
// and 256 MiB of memory (its peak resident set) on any report below, and 20 s each. A sanitizer
// reserves terabytes of shadow address space: there only the resident set is bounded (1 GiB).
constexpr uint64_t kAddressSpace = uint64_t{1} << 30;
#ifdef MEMGUARD_TEST_SANITIZED
constexpr bool kSanitized = true;
constexpr uint64_t kMaxRss = uint64_t{1} << 30;
#else
constexpr bool kSanitized = false;
constexpr uint64_t kMaxRss = uint64_t{256} << 20;
#endif
constexpr unsigned kSeconds = 20;
constexpr size_t kMaxOutput = 1 << 20;  // stdout, and the file plot and export write
// No file the CLI writes (its stdout too) may grow beyond this (RLIMIT_FSIZE: SIGXFSZ ends it), so
// that a command whose output blows up fails its test instead of filling the disk.
constexpr uint64_t kMaxFileSize = uint64_t{256} << 20;

struct CliRun {
    int rc = -1;       // exit status; 128 + signal when a signal ended it (SIGALRM: it ran too long)
    std::string out;   // stdout
    std::string err;   // stderr
    uint64_t rss = 0;  // peak resident set, bytes
    std::string describe() const {
        return "rc " + std::to_string(rc) + ", peak RSS " + std::to_string(rss >> 20) +
               " MiB, stderr: " + err.substr(0, 2000) + (err.size() > 2000 ? "..." : "");
    }
};

/// Runs the CLI with `args` in `dir` under the limits above.
CliRun run_limited(const std::string& dir, const std::vector<std::string>& args) {
    const std::string out_path = dir + "/.stdout", err_path = dir + "/.stderr";
    const std::string cli = test::cli_path();
    std::vector<std::string> argv = {cli};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || chdir(dir.c_str()) != 0) _exit(125);
        if (!kSanitized) {
            rlimit as{kAddressSpace, kAddressSpace};
            setrlimit(RLIMIT_AS, &as);
        }
        rlimit fsize{kMaxFileSize, kMaxFileSize};
        setrlimit(RLIMIT_FSIZE, &fsize);
        alarm(kSeconds);  // kept across exec: SIGALRM ends a CLI that hangs
        execv(cargv[0], cargv.data());
        _exit(126);
    }
    CliRun r;
    int status = 0;
    rusage usage{};
    if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
    r.out = test::read_file(out_path);
    r.err = test::read_file(err_path);
    return r;
}

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

uint64_t file_size(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

/// Every command, with the arguments it needs after the report; diff and merge pair the report
/// with itself.
std::vector<std::vector<std::string>> every_command(const std::string& report) {
    return {{"summary", report},
            {"summary", "--json", report},
            {"top", report},
            {"top", "--json", "--kind", "all", report},
            {"top", "--pool", report},
            {"graphs", report},
            {"hazards", report},
            {"cycles", report},
            {"cycles", "--json", report},
            {"cycles", "--explain", report},
            {"cycles", "--explain", "--json", report},
            {"phases", report},
            {"phases", "--json", report},
            {"phases", "--marks", report},
            {"diff", report, report},
            {"merge", report, report},
            {"plot", report, "-o", "out.svg"},
            {"plot", report, "-o", "out.html"},
            {"export", "--memory-viz", report, "-o", "out.pickle"},
            {"export", "--perfetto", report, "-o", "out.json"}};
}

std::string joined(const std::vector<std::string>& args) {
    std::string s;
    for (const std::string& a : args) s += (s.empty() ? "" : " ") + a;
    return s;
}

/// The output file a command names with -o, or "".
std::string output_of(const std::vector<std::string>& args) {
    auto o = std::find(args.begin(), args.end(), "-o");
    return o != args.end() && o + 1 != args.end() ? *(o + 1) : "";
}

void check_bounded(const CliRun& r, const std::string& what) {
    EXPECT_LT(r.rss, kMaxRss) << what << ": " << r.describe();
    EXPECT_LT(r.out.size(), kMaxOutput) << what;
    EXPECT_LT(r.err.size(), size_t{64} << 10) << what;
}

/// Each command refuses `content` with exit status 2 and the one line `message` (after "memguard:
/// error: " and the file name), writes nothing else, and stays within the limits.
void expect_refused_by_every_command(const std::string& content, const std::string& message) {
    test::TempDir dir;
    dir.write("r.mgr", content);
    for (const auto& args : every_command("r.mgr")) {
        const std::string what = joined(args);
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 2) << what << ": " << r.describe();
        EXPECT_EQ(r.err, "memguard: error: r.mgr:" + message + "\n") << what;
        EXPECT_EQ(r.out, "") << what;
        check_bounded(r, what);
        if (!output_of(args).empty()) {
            EXPECT_EQ(file_size(dir.path() + "/" + output_of(args)), 0u) << what;
        }
    }
}

/// Each command reads `content` (exit status 0, warnings allowed) within the limits, with an
/// output of less than kMaxOutput bytes.
void expect_read_by_every_command(const std::string& content) {
    test::TempDir dir;
    dir.write("r.mgr", content);
    for (const auto& args : every_command("r.mgr")) {
        const std::string what = joined(args);
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 0) << what << ": " << r.describe();
        check_bounded(r, what);
        for (size_t start = 0; start < r.err.size();) {
            size_t nl = r.err.find('\n', start);
            EXPECT_EQ(r.err.compare(start, 18, "memguard: warning:"), 0) << what << ": " << r.err;
            start = nl == std::string::npos ? r.err.size() : nl + 1;
        }
        if (!output_of(args).empty()) {
            uint64_t size = file_size(dir.path() + "/" + output_of(args));
            EXPECT_GT(size, 0u) << what;
            EXPECT_LT(size, kMaxOutput) << what;
        }
    }
}

// --- item 3: a field's value never sizes an allocation ------------------------------------------

// A 130-byte report with device 268435456 made export --memory-viz use 7.3 GB (it sized a vector
// by the device number) and 2147483647 ended in "internal error: std::bad_alloc".
TEST(CliLimits, AbsurdDeviceOrdinalsAreOneLineErrorsForEveryCommand) {
    for (const char* device : {"268435456", "2147483647", "-7"}) {
        expect_refused_by_every_command(
            kHeader + "I format_minor 2\nS 1 7f00\nA 1000 9 7f0000000000 4096 device cudaMalloc " + device +
                " - 1 0 0\nZ 2000\n",
            "4: malformed A record: device '" + std::string(device) + "' out of range (-1 to 1023)");
    }
    expect_refused_by_every_command(kHeader + "I format_minor 5\nT 1 1 7f00 512 512 99999 0 0 0 0 -\nZ 2\n",
                                    "3: malformed T record: device '99999' out of range (-1 to 1023)");
}

// The highest device allowed costs the memory_viz snapshot 1024 device traces, a few bytes each.
TEST(CliLimits, TheHighestDeviceOrdinalIsCheap) {
    expect_read_by_every_command(kHeader + "I format_minor 3\nS 1 7f00\n"
                                           "A 1000 9 7f0000000000 4096 device cudaMalloc 1023 - 1 0 0\n"
                                           "N 1500 9 a001 2097152 1023 1 0 0\nQ 1600 9 7f4000000000 2097152 0 a001\n"
                                           "Z 2000\n");
}

TEST(CliLimits, TimesAtTheBoundAndBeyond) {
    const std::string max = std::to_string(kMaxTimeNs);
    // A run of 146 years: plot's time axis, the Perfetto slices and memory_viz's microseconds
    // (with a wall-clock origin at INT64_MAX) neither overflow nor turn the span into a count.
    expect_read_by_every_command(kHeader +
                                 "I format_minor 4\nI t0_unix_ns 9223372036854775807\nS 1 7f00\n"
                                 "A -" +
                                 max +
                                 " 9 7f0000000000 4096 device cudaMalloc 0 - 1 0 0\n"
                                 "B -" +
                                 max +
                                 " 9 1 api whole\nJ 0 9 api middle\n"
                                 "F " +
                                 max + " 9 7f0000000000 4096 cudaFree -\nb " + max + " 9 1\nZ " + max + "\n");
    expect_refused_by_every_command(kHeader + "Z 9223372036854775807\n",
                                    "2: malformed Z record: time '9223372036854775807' out of range (2^62 ns or "
                                    "more either way)");
}

// Sizes, counts and byte totals at the 64-bit limits: the totals stop there; nothing is sized by
// them (a count of lost records, an OOM site's blocks, a retention's bytes).
TEST(CliLimits, ValuesAtTheSixtyFourBitLimits) {
    const std::string max = "18446744073709551615", smax = "9223372036854775807";
    expect_read_by_every_command(
        kHeader + "I format_minor 6\nS 1 7f00\nC 10 9 1 5 global -\n" + "A 100 9 7f0000000000 " + max +
        " device cudaMalloc 0 - 1 1 0\n" + "A 101 9 7f1000000000 " + max + " managed cudaMallocManaged 0 - 1 0 0\n" +
        "E 102 9 " + max + " device cudaMalloc 0 - 1 2 " + max + " 0\n" + "W 103 9 warmup_retention 1 begin 0 1 " +
        max + " " + max + "\n" + "W 104 9 warmup_retention 1 begin 0 1 " + max + " " + max + "\n" +
        "c 105 9 1 0 abc\nG 106 9 e1 abc 1\nL 107 9 e1 5\n" + "Y 108 9 explicit 0 1 " + smax + " " + smax + " " + smax +
        " - -\n" + "Y 109 9 explicit 0 1 " + smax + " " + smax + " " + smax + " - -\n" + "T 110 9 7f0000000000 " + max +
        " " + max + " 0 0 1 0 1 -\n" + "O 111 9 0 " + max + " " + max + " " + max + " " + max + " " + max +
        " 1 0 none\n" + "o 111 1 0 " + max + " " + max + "\n" + "U 112 0 " + max + "\nU 113 0 " + max + "\nZ 200\n");
}

// Item 9: `cycles` printed a negative total for collections whose counts sum beyond INT64_MAX.
TEST(CliLimits, CyclesTotalsDoNotGoNegative) {
    test::TempDir dir;
    const std::string smax = "9223372036854775807";
    dir.write("r.mgr", kHeader + "I format_minor 2\nY 1 9 explicit 0 5 " + smax + " 3 " + smax + " - -\n" +
                           "Y 2 9 explicit 0 5 " + smax + " 3 " + smax + " - -\nZ 3\n");
    CliRun r = run_limited(dir.path(), {"cycles", "r.mgr"});
    ASSERT_EQ(r.rc, 0) << r.describe();
    size_t row = r.out.find("\n  explicit ");
    ASSERT_NE(row, std::string::npos) << r.out;
    std::string totals = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
    EXPECT_TRUE(contains(totals, " " + smax + " ")) << totals;  // collected: the largest, not wrapped
    for (size_t at = totals.find(" -"); at != std::string::npos; at = totals.find(" -", at + 1)) {
        EXPECT_FALSE(at + 2 < totals.size() && isdigit(static_cast<unsigned char>(totals[at + 2]))) << totals;
    }
    EXPECT_TRUE(contains(totals, "8589934592.00 GiB")) << totals;  // CUDA freed: INT64_MAX bytes
    EXPECT_TRUE(contains(totals, " huge ")) << totals;             // per ms: beyond the int64 range
}

/// The line of `out` that starts with `start`, or "".
std::string line_starting(const std::string& out, const std::string& start) {
    size_t at = out.rfind(start, 0) == 0 ? 0 : out.find("\n" + start);
    if (at == std::string::npos) return "";
    if (at != 0) ++at;
    return out.substr(at, out.find('\n', at) - at);
}

// diff computed B - A in 64 bits: two reports whose collections freed INT64_MAX and -INT64_MAX
// CUDA bytes (any int64 is a valid value) overflowed (undefined behaviour: a delta of +2 B), and a
// peak beyond INT64_MAX showed as negative. The figures and their deltas are exact now.
TEST(CliLimits, DiffDeltasAtTheSixtyFourBitLimitsAreExact) {
    const std::string smax = "9223372036854775807", max = "18446744073709551615";
    test::TempDir dir;
    dir.write("a.mgr", kHeader + "I format_minor 2\nY 1 9 explicit 0 5 1 0 " + smax + " - -\nZ 3\n");
    dir.write("b.mgr", kHeader + "I format_minor 2\nY 1 9 explicit 0 5 1 0 -" + smax + " - -\nZ 3\n");
    dir.write("p.mgr", kHeader + "I format_minor 2\nS 1 7f00\nA 1 9 7f0000000000 " + max +
                           " device cudaMalloc 0 - 1 0 0\nZ 3\n");
    CliRun ab = run_limited(dir.path(), {"diff", "a.mgr", "b.mgr"});
    ASSERT_EQ(ab.rc, 0) << ab.describe();
    // 2^64 - 2 bytes less.
    EXPECT_TRUE(contains(line_starting(ab.out, "  freed by gc (explicit) "),
                         " 8589934592.00 GiB -8589934592.00 GiB -17179869184.00 GiB  -1.000"))
        << ab.out;
    CliRun ba = run_limited(dir.path(), {"diff", "b.mgr", "a.mgr"});
    EXPECT_TRUE(contains(line_starting(ba.out, "  freed by gc (explicit) "),
                         " -8589934592.00 GiB 8589934592.00 GiB +17179869184.00 GiB  -1.000"))
        << ba.out;
    CliRun json = run_limited(dir.path(), {"diff", "--json", "a.mgr", "b.mgr"});
    ASSERT_EQ(json.rc, 0) << json.describe();
    EXPECT_TRUE(contains(json.out, "\"freed_by_gc_explicit\": {\n      \"a\": " + smax + ",\n      \"b\": -" + smax +
                                       ",\n      \"delta\": -18446744073709551614,\n      \"ratio\": -1.000000\n"))
        << json.out;
    // A peak of UINT64_MAX bytes: not -1 B.
    CliRun peak = run_limited(dir.path(), {"diff", "a.mgr", "p.mgr"});
    ASSERT_EQ(peak.rc, 0) << peak.describe();
    EXPECT_TRUE(contains(line_starting(peak.out, "  peak "), " 0 B 17179869184.00 GiB +17179869184.00 GiB       -"))
        << peak.out;
    EXPECT_TRUE(contains(peak.out,
                         "Sites at the peak that grew: 1\n  +17179869184.00 GiB          0 B -> 17179869184.00 GiB  "))
        << peak.out;
    CliRun peak_json = run_limited(dir.path(), {"diff", "--json", "p.mgr", "a.mgr"});
    EXPECT_TRUE(contains(peak_json.out, "\"peak\": {\n      \"a\": " + max + ",\n      \"b\": 0,\n      \"delta\": -" +
                                            max + ",\n      \"ratio\": 0.000000\n"))
        << peak_json.out;
}

// merge's sums over the ranks wrapped: two ranks of 10^19 bytes each (a report may give any
// uint64) summed to 1.55 * 10^18, less than either. They stop at UINT64_MAX now.
TEST(CliLimits, MergeSumsStopAtTheSixtyFourBitLimit) {
    test::TempDir dir;
    for (const char* name : {"r0.mgr", "r1.mgr"}) {
        dir.write(name, kHeader + "I format_minor 2\nS 1 7f00\nA 1 9 7f0000000000 10000000000000000000 device "
                                  "cudaMalloc 0 - 1 0 0\nZ 3\n");
    }
    CliRun text = run_limited(dir.path(), {"merge", "r0.mgr", "r1.mgr"});
    ASSERT_EQ(text.rc, 0) << text.describe();
    EXPECT_EQ(line_starting(text.out, "max "), "max    9313225746.15 GiB           9313225746.15 GiB    0          0 B")
        << text.out;
    // Peak and live at exit.
    EXPECT_EQ(line_starting(text.out, "sum "),
              "sum    17179869184.00 GiB           17179869184.00 GiB    0          0 B")
        << text.out;
    CliRun json = run_limited(dir.path(), {"merge", "--json", "r0.mgr", "r1.mgr"});
    ASSERT_EQ(json.rc, 0) << json.describe();
    size_t sum = json.out.find("\"sum\": {");
    ASSERT_NE(sum, std::string::npos) << json.out;
    EXPECT_TRUE(contains(json.out.substr(sum), "\"peak_bytes\": 18446744073709551615,\n")) << json.out.substr(sum);
    EXPECT_TRUE(contains(json.out.substr(sum), "\"live_bytes_at_exit\": 18446744073709551615,\n"))
        << json.out.substr(sum);
}

// Phases never ended (or nested deeply) were matched against every phase still open: a report of
// 100000 B records took O(n^2) steps in every command that shows phases.
// One explanation of 50000 storages, 50000 chains to other addresses and 50000 groups: the text
// shows a bounded part of it, and neither view compares every chain with every storage.
TEST(CliLimits, AnExplanationOfManyStoragesChainsAndGroupsIsCheap) {
    test::TempDir dir;
    const int n = 50000;
    std::string body = kHeader + "I format_minor 9\nj 1 1 1 10 50000 204800000 10 1\n";
    for (int i = 0; i < n; ++i) {
        char addr[32], other[32];
        std::snprintf(addr, sizeof addr, "%x", 0x10000000 + i * 4096);
        std::snprintf(other, sizeof other, "%x", 0x90000000 + i * 4096);
        body += std::string("y 1 0 ") + addr + " 4096 tensor other_tensor -\nr 1 " + other +
                " 0 frame%20f%20x.py:1 -\nu 1 frame 1 4096 f%20x.py:" + std::to_string(i) + "\n";
    }
    dir.write("r.mgr", body + "Y 2 1 step 2 1 1 0 0 - - 0 1\nZ 3\n");
    CliRun r = run_limited(dir.path(), {"cycles", "--explain", "r.mgr"});
    ASSERT_EQ(r.rc, 0) << r.describe();
    EXPECT_LT(lines(r.out), 60u) << r.out.substr(0, 4000);
    CliRun j = run_limited(dir.path(), {"cycles", "--explain", "--json", "r.mgr"});
    ASSERT_EQ(j.rc, 0) << j.describe();
}

TEST(CliLimits, ManyOpenPhasesTakeLinearishTime) {
    std::string content = kHeader + "I format_minor 4\nS 1 7f00\nA 1 9 7f0000000000 4096 device cudaMalloc 0 - 1 0 0\n";
    for (int i = 1; i <= 100000; ++i) content += "B " + std::to_string(i) + " 9 " + std::to_string(i) + " api p\n";
    content += "Z 200000\n";
    test::TempDir dir;
    dir.write("r.mgr", content);
    for (const std::vector<std::string>& args : {std::vector<std::string>{"phases", "--json", "r.mgr"},
                                                 {"plot", "r.mgr", "-o", "out.svg"},
                                                 {"export", "--perfetto", "r.mgr", "-o", "out.json"},
                                                 {"diff", "r.mgr", "r.mgr"}}) {
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 0) << joined(args) << ": " << r.describe();
        EXPECT_LT(r.rss, kMaxRss) << joined(args) << ": " << r.describe();
    }
}

// The streaming reader's phases (report/stream_phases.h) keep the open phases in order of begin: a
// phase that ends must not cost a walk over all those begun after it. 100000 nested phases, an
// allocation in each, ended first-begun first.
TEST(CliLimits, ManyPhasesEndedFirstBegunFirstTakeLinearishTime) {
    constexpr int kPhases = 100000;
    std::string content = kHeader + "I format_minor 4\nS 1 7f00\n";
    char line[160];
    for (int i = 1; i <= kPhases; ++i) {
        std::snprintf(line, sizeof line, "B %d 9 %d api p\nA %d 9 %x %d device cudaMalloc 0 - 1 0 0\n", i, i, i,
                      0x10000000 + i * 4096, 1 + i % 4096);
        content += line;
    }
    for (int i = 1; i <= kPhases; ++i) {
        std::snprintf(line, sizeof line, "b %d 9 %d\nF %d 9 %x %d cudaFree -\n", kPhases + i, i, kPhases + i,
                      0x10000000 + i * 4096, 1 + i % 4096);
        content += line;
    }
    content += "Z 300000\n";
    test::TempDir dir;
    dir.write("r.mgr", content);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"phases", "--json", "r.mgr"}, {"diff", "r.mgr", "r.mgr"}}) {
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 0) << joined(args) << ": " << r.describe();
        EXPECT_LT(r.rss, kMaxRss) << joined(args) << ": " << r.describe();
    }
}

// `phases` indented each name by two spaces per nesting depth, so its text grew with the square of
// the phases: 100000 nested B records (a 2.2 MB report) made it write 10 GB. Beyond depth 16 the
// depth is shown as a number; the text and the JSON stay a few hundred bytes per phase.
TEST(CliLimits, DeeplyNestedPhasesKeepTheOutputLinear) {
    constexpr size_t kPhases = 100000;
    std::string content = kHeader + "I format_minor 4\nS 1 7f00\nA 1 9 7f0000000000 4096 device cudaMalloc 0 - 1 0 0\n";
    for (size_t i = 1; i <= kPhases; ++i) content += "B " + std::to_string(i) + " 9 " + std::to_string(i) + " api p\n";
    content += "Z 200000\n";
    test::TempDir dir;
    dir.write("r.mgr", content);
    CliRun text = run_limited(dir.path(), {"phases", "r.mgr"});
    ASSERT_EQ(text.rc, 0) << text.describe();
    EXPECT_LT(text.out.size(), 200 * kPhases) << text.describe();
    size_t longest = 0;
    for (size_t start = 0; start < text.out.size();) {
        size_t nl = std::min(text.out.find('\n', start), text.out.size());
        longest = std::max(longest, nl - start);
        start = nl + 1;
    }
    EXPECT_LT(longest, 200u);
    EXPECT_GT(lines(text.out), kPhases);
    // The last indented depth, then the depth as a number.
    EXPECT_TRUE(contains(text.out, " 9  " + std::string(32, ' ') + "p\n")) << text.out.substr(0, 4000);
    EXPECT_TRUE(contains(text.out, " 9  " + std::string(32, ' ') + "[depth 17] p\n")) << text.out.substr(0, 4000);
    EXPECT_TRUE(contains(text.out, " 9  " + std::string(32, ' ') + "[depth 99999] p\n"));
    EXPECT_FALSE(contains(text.out, std::string(36, ' ') + "p\n"));
    CliRun json = run_limited(dir.path(), {"phases", "--json", "r.mgr"});
    ASSERT_EQ(json.rc, 0) << json.describe();
    EXPECT_LT(json.out.size(), 600 * kPhases) << json.describe();
    EXPECT_TRUE(contains(json.out, "\n    \"depth\": 99999,\n")) << json.out.substr(json.out.size() - 2000);
}

// Modules naming one big library (libstdc++) many times: each file is mapped and read once, not
// once per M record (20000 records took 20000 copies of its symbol tables).
TEST(CliLimits, ManyModulesNamingOneFileShareIt) {
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void*>(&std::terminate), &info), 0);
    ASSERT_NE(info.dli_fname, nullptr);
    const std::string lib = info.dli_fname;
    std::string content = kHeader + "I format_minor 2\n";
    char line[512];
    for (int i = 0; i < 20000; ++i) {
        const unsigned long long lo = 0x100000000000ull + static_cast<unsigned long long>(i) * 0x1000000ull;
        std::snprintf(line, sizeof line, "M %d %llx %llx %llx - %s\nS %d %llx\n", i, lo, lo + 0x1000000, lo,
                      text::encode(lib).c_str(), i + 1, lo + 0x1234);
        content += line;
        std::snprintf(line, sizeof line, "A %d 9 %llx 4096 device cudaMalloc 0 - %d 0 0\n", i + 10, lo, i + 1);
        content += line;
    }
    content += "Z 90000\n";
    test::TempDir dir;
    dir.write("r.mgr", content);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"export", "--memory-viz", "r.mgr", "-o", "out.pickle"},
          {"top", "-n", "20000", "--frames", "1", "r.mgr"}}) {
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 0) << joined(args) << ": " << r.describe();
        EXPECT_LT(r.rss, kMaxRss) << joined(args) << ": " << r.describe();
        EXPECT_LT(lines(r.err), 5u) << r.err.substr(0, 2000);
    }
}

// --- item 4: module paths are the report author's ------------------------------------------------

// A module path naming a FIFO blocked top, plot, export --memory-viz and diff forever.
TEST(CliLimits, AModuleThatIsAFifoDoesNotHangAnyCommand) {
    test::TempDir dir;
    const std::string fifo = dir.path() + "/libfifo.so";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    dir.write("r.mgr", kHeader + "M 0 7f0000000000 7f0000100000 7f0000000000 - " + text::encode(fifo) +
                           "\nS 1 7f0000001234\nA 1 9 7f2000000000 4096 device cudaMalloc 0 - 1\nZ 2\n");
    for (const std::vector<std::string>& args : {std::vector<std::string>{"top", "r.mgr"},
                                                 {"plot", "r.mgr", "-o", "out.svg"},
                                                 {"export", "--memory-viz", "r.mgr", "-o", "out.pickle"},
                                                 {"diff", "r.mgr", "r.mgr"},
                                                 {"merge", "r.mgr"},
                                                 {"summary", "r.mgr"}}) {
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 0) << joined(args) << ": " << r.describe();
        if (args[0] != "summary") {
            EXPECT_TRUE(contains(r.err, "memguard: warning: " + fifo + ": cannot read (not a regular file)"))
                << joined(args) << ": " << r.err;
        }
    }
}

/// The symtest library's M record and a stack in it, with `path` for its file.
std::string symtest_report(const std::string& path, std::string* build_id = nullptr) {
    void* ip = memguard_symtest::call_hidden_function(2);
    auto m = test::module_of(ip);
    if (!m) throw std::runtime_error("module not found");
    if (build_id != nullptr) *build_id = m->build_id;
    char s[64];
    std::snprintf(s, sizeof s, "S 1 %llx\n", static_cast<unsigned long long>(reinterpret_cast<uint64_t>(ip)));
    return kHeader + "I pid 1\n" + m->m_record(0, nullptr, &path) + s +
           "A 1 1 7f00 4096 device cudaMalloc 0 - 1\nZ 2\n";
}

TEST(CliLimits, SysrootAndDebugDirFindACopyOfTheLibrary) {
    void* ip = memguard_symtest::call_hidden_function(2);
    auto m = test::module_of(ip);
    ASSERT_TRUE(m);
    test::TempDir dir;
    // --sysroot: the report names /libmemguard_symtest.so, which is a file of the sysroot only.
    dir.write("libmemguard_symtest.so", test::read_file(m->path));
    dir.write("r.mgr", symtest_report("/libmemguard_symtest.so"));
    CliRun plain = run_limited(dir.path(), {"top", "r.mgr"});
    ASSERT_EQ(plain.rc, 0) << plain.describe();
    EXPECT_FALSE(contains(plain.out, "hidden_function")) << plain.out;
    for (const char* cmd : {"top", "hazards", "summary"}) {
        CliRun r = run_limited(dir.path(), {cmd, "--sysroot", dir.path(), "r.mgr"});
        EXPECT_EQ(r.rc, 0) << cmd << ": " << r.describe();
    }
    CliRun sys = run_limited(dir.path(), {"top", "--sysroot", dir.path(), "r.mgr"});
    EXPECT_TRUE(contains(sys.out, "memguard_symtest::hidden_function(int)")) << sys.out;
    CliRun sys_eq = run_limited(dir.path(), {"top", "--sysroot=" + dir.path(), "r.mgr"});
    EXPECT_EQ(sys_eq.out, sys.out);
    CliRun viz = run_limited(dir.path(),
                             {"export", "--memory-viz", "--sysroot", dir.path(), "r.mgr", "-o", "v.pickle"});
    EXPECT_EQ(viz.rc, 0) << viz.describe();
    EXPECT_TRUE(contains(test::read_file(dir.path() + "/v.pickle"), "memguard_symtest::hidden_function(int)"));

    // --debug-dir: the module is the stripped copy, the symbols come from the debug file found by
    // build-id.
    std::string stripped = MEMGUARD_SYMTEST_STRIPPED, debug = MEMGUARD_SYMTEST_DEBUG;
    if (stripped.empty() || debug.empty()) GTEST_SKIP() << "needs strip and objcopy";
    std::string build_id;
    dir.write("s.mgr", symtest_report(stripped, &build_id));
    test::TempDir debug_dir;
    std::string sub = debug_dir.path() + "/.build-id/" + build_id.substr(0, 2);
    ASSERT_EQ(mkdir((debug_dir.path() + "/.build-id").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
    std::string debug_file = sub + "/" + build_id.substr(2) + ".debug";
    std::ofstream(debug_file, std::ios::binary) << test::read_file(debug);
    CliRun no_debug = run_limited(dir.path(), {"top", "s.mgr"});
    EXPECT_FALSE(contains(no_debug.out, "hidden_function")) << no_debug.out;
    CliRun with_debug = run_limited(dir.path(), {"top", "--debug-dir", debug_dir.path(), "s.mgr"});
    EXPECT_EQ(with_debug.rc, 0) << with_debug.describe();
    EXPECT_TRUE(contains(with_debug.out, "memguard_symtest::hidden_function(int)")) << with_debug.out;
    if (!find_program("addr2line").empty()) {
        EXPECT_TRUE(contains(with_debug.out, "symtest_lib.cpp:")) << with_debug.out;
    }
    unlink(debug_file.c_str());
    rmdir(sub.c_str());
    rmdir((debug_dir.path() + "/.build-id").c_str());
}

TEST(CliLimits, SysrootAndDebugDirMustBeDirectories) {
    test::TempDir dir;
    std::string file = dir.write("r.mgr", kHeader + "Z 1\n");
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"top", "--sysroot", "/nonexistent-memguard", "r.mgr"},
          {"plot", "r.mgr", "-o", "x.svg", "--debug-dir", file},
          {"top", "--sysroot=", "r.mgr"},
          {"graphs", "--sysroot", dir.path(), "r.mgr"},
          {"phases", "--debug-dir", dir.path(), "r.mgr"}}) {
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 2) << joined(args) << ": " << r.describe();
        EXPECT_EQ(r.err.rfind("memguard: error: ", 0), 0u) << r.err;
        EXPECT_EQ(lines(r.err), 2u) << r.err;  // the problem, then the usage line
    }
    EXPECT_TRUE(contains(run_limited(dir.path(), {"top", "--sysroot", "/nonexistent-memguard", "r.mgr"}).err,
                         "bad value '/nonexistent-memguard' for --sysroot: No such file or directory"));
    EXPECT_TRUE(contains(run_limited(dir.path(), {"top", "--debug-dir", file, "r.mgr"}).err,
                         "bad value '" + file + "' for --debug-dir: not a directory"));
}

// --- item 6: a report cut by a full disk ---------------------------------------------------------

TEST(CliLimits, ACutReportIsReadWithItsWarningOnce) {
    test::TempDir dir;
    std::string content = kHeader + "S 1 7f00\nA 1000 9 7f0000000000 4096 device cudaMalloc 0 - 1\nF 2000 9 7f00000";
    dir.write("r.mgr", content);
    for (const std::vector<std::string>& args : {std::vector<std::string>{"summary", "r.mgr"},
                                                 {"top", "--json", "r.mgr"},
                                                 {"plot", "r.mgr", "-o", "o.svg"},
                                                 {"export", "--perfetto", "r.mgr", "-o", "o.json"}}) {
        CliRun r = run_limited(dir.path(), args);
        EXPECT_EQ(r.rc, 0) << joined(args) << ": " << r.describe();
        const std::string warning =
            "memguard: warning: r.mgr:4: truncated at byte " + std::to_string(content.size()) +
            " (last record incomplete: disk full?); read up to line 3, the last complete record\n";
        EXPECT_EQ(r.err.rfind(warning, 0), 0u) << joined(args) << ": " << r.err;
        EXPECT_EQ(r.err.find(warning, 1), std::string::npos) << joined(args) << ": " << r.err;
    }
    CliRun top = run_limited(dir.path(), {"top", "r.mgr"});
    EXPECT_TRUE(contains(top.out, "4.00 KiB in 1 block")) << top.out;  // the cut free is not read
    dir.write("h.mgr", "MEMGUARD-REPORT 1");
    CliRun header = run_limited(dir.path(), {"summary", "h.mgr"});
    EXPECT_EQ(header.rc, 2);
    EXPECT_EQ(header.err, "memguard: error: h.mgr:1: truncated at byte 17 (the header line is incomplete)\n");
}

}  // namespace
}  // namespace memguard::report

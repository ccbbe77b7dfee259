// Format minor 4 (phases and marks) in the reader, the figures derived per phase, the pickle writer
// of the memory_viz export, and the command line of the issue-6 commands (phases, diff, merge, plot,
// export). The golden tests and check_exports.py cover the commands' output on checked-in reports.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "report/pickle.h"
#include "report/timeline.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::contains;
using test::parse;

const std::string kMinor4 = "I format_minor 4\n";

std::string alloc(int64_t t, const char* addr, uint64_t size, uint64_t tid = 1) {
    return "A " + std::to_string(t) + " " + std::to_string(tid) + " " + addr + " " + std::to_string(size) +
           " device cudaMalloc 0 - 0 0 0\n";
}

std::string free_(int64_t t, const char* addr, uint64_t size) {
    return "F " + std::to_string(t) + " 1 " + addr + " " + std::to_string(size) + " cudaFree -\n";
}

/// The largest level of `series` over points[from..to] and its first index, by looking at each.
std::pair<uint64_t, size_t> scanned_max(const Timeline& tl, size_t from, size_t to, Series series) {
    uint64_t best = tl.level(from, series);
    size_t at = from;
    for (size_t k = from; k <= to; ++k) {
        if (tl.level(k, series) > best) {
            best = tl.level(k, series);
            at = k;
        }
    }
    return {best, at};
}

TEST(Phases, RecordsAreReadFromMinor4Only) {
    std::string body = "B 10 1 1 api step%200\nJ 15 2 nvtx domain::tick\nb 20 1 1\nZ 30\n";
    Report old = parse("I format_minor 3\n" + body);
    EXPECT_TRUE(old.phases.empty());
    EXPECT_TRUE(old.marks.empty());
    Report r = parse(kMinor4 + body);
    ASSERT_EQ(r.phases.size(), 1u);
    EXPECT_EQ(r.phases[0].id, 1u);
    EXPECT_EQ(r.phases[0].name, "step 0");
    EXPECT_EQ(r.phases[0].source, PhaseSource::Api);
    EXPECT_EQ(r.phases[0].t_begin, 10);
    EXPECT_EQ(r.phases[0].t_end.value_or(-1), 20);
    ASSERT_EQ(r.marks.size(), 1u);
    EXPECT_EQ(r.marks[0].name, "domain::tick");
    EXPECT_EQ(r.marks[0].source, PhaseSource::Nvtx);
    EXPECT_EQ(r.marks[0].tid, 2u);
}

TEST(Phases, MalformedRecordsAreErrors) {
    EXPECT_TRUE(
        contains(test::error_of(test::kHeader + kMinor4 + "B 1 1 1 profiler x\n"), "unknown source 'profiler'"));
    EXPECT_TRUE(contains(test::error_of(test::kHeader + kMinor4 + "B 1 1 0 api x\n"), "phase id 0"));
    EXPECT_TRUE(contains(test::error_of(test::kHeader + kMinor4 + "B 1 1 1 api\n"), "5 fields expected"));
    EXPECT_TRUE(contains(test::error_of(test::kHeader + kMinor4 + "b 1 1\n"), "3 fields expected"));
    EXPECT_TRUE(contains(test::error_of(test::kHeader + kMinor4 + "J 1 1 api bad%zzname\n"), "percent-encoding"));
}

TEST(Phases, UnknownAndRepeatedRecordsWarn) {
    Report r = parse(kMinor4 + "B 1 1 1 api a\nB 2 1 1 api b\nb 3 1 9\nb 4 1 1\nb 5 1 1\nZ 6\n");
    ASSERT_EQ(r.phases.size(), 1u);
    EXPECT_EQ(r.phases[0].name, "a");
    EXPECT_EQ(r.phases[0].t_end.value_or(-1), 4);
    std::string all;
    for (const std::string& w : r.warnings) all += w + "\n";
    EXPECT_TRUE(contains(all, "phase 1 begun twice")) << all;
    EXPECT_TRUE(contains(all, "ends phase 9")) << all;
    EXPECT_TRUE(contains(all, "phase 1 ended twice")) << all;
}

TEST(Phases, EntryPeakIncrementalAndExit) {
    // 100 live before; inside: +50 (150), +200 (350), -200 (150), +10 (160) -> exit 160.
    Report r = parse(kMinor4 + alloc(1, "1000", 100) + "B 2 1 1 api p\n" + alloc(3, "2000", 50) +
                     alloc(4, "3000", 200) + free_(5, "3000", 200) + alloc(6, "4000", 10) + "b 7 1 1\n" +
                     alloc(8, "5000", 1000) + "Z 9\n");
    Timeline tl = build_timeline(r);
    ASSERT_EQ(tl.points.size(), r.events.size() + 1);
    std::vector<PhaseStats> s = phase_stats(r, tl);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].entry_bytes, 100u);
    EXPECT_EQ(s[0].peak_bytes, 350u);
    EXPECT_EQ(s[0].incremental_peak(), 250u);
    EXPECT_EQ(s[0].peak_t, 4);
    EXPECT_EQ(s[0].exit_bytes, 160u);  // the allocation after b is not in the phase
    EXPECT_EQ(s[0].t_end, 7);
}

TEST(Phases, PeakIncludesTheStateAtBeginAndAnUnendedPhaseRunsToTheEnd) {
    // Memory only falls inside the phase: its peak is its entry (incremental peak 0).
    Report r = parse(kMinor4 + alloc(1, "1000", 100) + "B 2 1 1 api falling\n" + free_(3, "1000", 100) +
                     "B 4 1 2 api open\n" + alloc(5, "2000", 40) + "b 6 1 1\nZ 9\n");
    std::vector<PhaseStats> s = phase_stats(r, build_timeline(r));
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].peak_bytes, 100u);
    EXPECT_EQ(s[0].incremental_peak(), 0u);
    EXPECT_EQ(s[0].exit_bytes, 40u);
    EXPECT_FALSE(r.phases[1].t_end.has_value());
    EXPECT_EQ(s[1].exit_bytes, 40u);
    EXPECT_EQ(s[1].t_end, 9);
    EXPECT_EQ(s[1].depth, 1);  // opened inside phase 1 on the same thread
}

TEST(Phases, NestingIsPerThreadAndRangesNestAmongThemselves) {
    Report r = parse(kMinor4 + "B 1 1 1 api outer\n"
                               "B 2 1 2 nvtx inner\n"
                               "B 2 7 3 nvtx other_thread\n"
                               "B 3 7 4 nvtx_range range\n"
                               "B 3 1 5 nvtx_range range2\n"
                               "b 4 1 2\nb 5 1 1\nb 6 7 3\nb 7 1 4\nb 8 1 5\n"
                               "B 9 1 6 api outer\nb 10 1 6\nZ 11\n");
    std::vector<PhaseStats> s = phase_stats(r, build_timeline(r));
    ASSERT_EQ(s.size(), 6u);
    EXPECT_EQ(s[0].depth, 0);
    EXPECT_EQ(s[1].depth, 1);
    EXPECT_EQ(s[1].parent.value_or(0), 1u);
    EXPECT_EQ(s[2].depth, 0);  // another thread
    EXPECT_EQ(s[3].depth, 0);  // ranges are apart from push/pop phases
    EXPECT_EQ(s[4].depth, 1);  // but nest among themselves, process-wide
    EXPECT_EQ(s[4].parent.value_or(0), 4u);
    EXPECT_EQ(s[5].depth, 0);  // the first "outer" has ended
    EXPECT_EQ(s[0].occurrence, 0u);
    EXPECT_EQ(s[5].occurrence, 1u);
}

TEST(Phases, MarksSeeTheLiveBytesBeforeThem) {
    Report r = parse(kMinor4 + alloc(1, "1000", 100) + "J 2 1 api m1\n" + alloc(2, "2000", 5) + "J 2 1 api m2\nZ 3\n");
    Timeline tl = build_timeline(r);
    ASSERT_EQ(r.marks.size(), 2u);
    EXPECT_EQ(live_at_mark(r.marks[0], tl), 100u);
    EXPECT_EQ(live_at_mark(r.marks[1], tl), 105u);
}

TEST(Phases, RangeMaximumMatchesALinearScan) {
    // A random walk of allocations and frees over several blocks of the range-maximum index, so that
    // the level goes up and down and block maxima lie close to each other.
    std::string body = kMinor4;
    uint64_t x = 12345;
    auto next = [&x] {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return x >> 33;
    };
    std::vector<std::pair<std::string, uint64_t>> live;
    for (int i = 0; i < 6000; ++i) {
        if (!live.empty() && next() % 2 == 0) {
            size_t k = next() % live.size();
            body += free_(i, live[k].first.c_str(), live[k].second);
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
            char addr[32];
            std::snprintf(addr, sizeof addr, "%x", 0x10000 + i);
            uint64_t size = next() % 1000 + 1;
            body += alloc(i, addr, size);
            live.emplace_back(addr, size);
        }
    }
    Report r = parse(body + "Z 99999\n");
    Timeline tl = build_timeline(r);
    size_t last = tl.points.size() - 1;
    for (size_t from : {size_t{0}, size_t{1}, size_t{1023}, size_t{1024}, size_t{1500}, size_t{4000}}) {
        for (size_t to : {from, from + 1, from + 1024, from + 2047, from + 3000, last}) {
            if (to > last || to < from) continue;
            auto [best, at] = scanned_max(tl, from, to, Series::Gpu);
            auto [peak, where] = tl.max_level(from, to, Series::Gpu);
            EXPECT_EQ(peak, best) << from << ".." << to;
            EXPECT_EQ(where, at) << from << ".." << to;
        }
    }
}

TEST(Phases, RangeMaximumFindsAPeakOneByteAboveTheRest) {
    // Level 1000 and 1001 alternating over two blocks of the index, and one step to 1002 in the second.
    std::string body = kMinor4 + alloc(0, "1000", 1000);
    for (int i = 1; i < 2200; i += 2) {
        uint64_t size = i == 1501 ? 2 : 1;
        body += alloc(i, "2000", size) + free_(i + 1, "2000", size);
    }
    Report r = parse(body + "Z 99999\n");
    Timeline tl = build_timeline(r);
    auto [peak, at] = tl.max_level(0, tl.points.size() - 1, Series::Gpu);
    EXPECT_EQ(peak, 1002u);
    EXPECT_EQ(tl.points[at].t, 1501);
}

TEST(Phases, RangeMaximumOfTheTensorSeriesMatchesAScan) {
    // Allocator mode: tensor blocks of varying sizes in one segment, over several blocks of the
    // index; the tensor series' maximum over ranges agrees with a scan of the points.
    std::string body = "I format_minor 5\nI allocator memguard\n" + alloc(0, "100000000", 1 << 30);
    uint64_t x = 7;
    std::vector<uint64_t> live;
    for (int i = 1; i < 5000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::string t = std::to_string(i);
        if (!live.empty() && (x >> 40) % 3 == 0) {
            char addr[32];
            std::snprintf(addr, sizeof addr, "%llx", static_cast<unsigned long long>(live.back()));
            body += "t " + t + " 1 " + addr + " 0\n";
            live.pop_back();
        } else {
            const uint64_t a = 0x100000000ull + 0x10000ull * static_cast<uint64_t>(i);
            char addr[32];
            std::snprintf(addr, sizeof addr, "%llx", static_cast<unsigned long long>(a));
            const std::string size = std::to_string(512 * ((x >> 33) % 64 + 1));
            body += "T " + t + " 1 " + addr + " " + size + " " + size + " 0 0 0 0 0 -\n";
            live.push_back(a);
        }
    }
    Report r = parse(body + "Z 99999\n");
    Timeline tl = build_timeline(r);
    ASSERT_TRUE(tl.has_tensors);
    const size_t last = tl.points.size() - 1;
    for (size_t from : {size_t{0}, size_t{1}, size_t{1023}, size_t{1024}, size_t{2500}}) {
        for (size_t to : {from, from + 1, from + 1024, from + 2047, last}) {
            if (to > last || to < from) continue;
            auto [best, at] = scanned_max(tl, from, to, Series::Tensors);
            auto [peak, where] = tl.max_level(from, to, Series::Tensors);
            EXPECT_EQ(peak, best) << from << ".." << to;
            EXPECT_EQ(where, at) << from << ".." << to;
            if (to >= 1) {
                EXPECT_EQ(tl.max_level(from, to, Series::Gpu).first, uint64_t{1} << 30) << "the segment's series";
            }
        }
    }
}

// --- the pickle writer -----------------------------------------------------------------------

std::string bytes_of(PickleWriter& p) {
    std::string s = p.finish();
    EXPECT_EQ(s.substr(0, 2), std::string("\x80\x04", 2));
    EXPECT_EQ(s.back(), '.');
    return s.substr(2, s.size() - 3);
}

TEST(Pickle, IntegersUseTheSmallestOpcode) {
    auto enc = [](int64_t v) {
        PickleWriter p;
        p.integer(v);
        return bytes_of(p);
    };
    EXPECT_EQ(enc(0), std::string("K\x00", 2));
    EXPECT_EQ(enc(255), "K\xff");
    EXPECT_EQ(enc(256), std::string("M\x00\x01", 3));
    EXPECT_EQ(enc(65536), std::string("J\x00\x00\x01\x00", 5));
    EXPECT_EQ(enc(-1), "J\xff\xff\xff\xff");
    // A device address: LONG1 with 6 bytes (0x7f12a4000000).
    EXPECT_EQ(enc(0x7f12a4000000), std::string("\x8a\x06\x00\x00\x00\xa4\x12\x7f", 8));
    // 2^31 needs a fifth byte so that it stays positive.
    EXPECT_EQ(enc(int64_t{1} << 31), std::string("\x8a\x05\x00\x00\x00\x80\x00", 7));
    EXPECT_EQ(enc(INT64_MIN), std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10));
    PickleWriter p;
    p.uinteger(UINT64_MAX);
    EXPECT_EQ(bytes_of(p), std::string("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11));
}

TEST(Pickle, StringsContainersAndMemo) {
    PickleWriter p;
    p.begin_dict().str("k").begin_list().str(std::string(300, 'x')).str("\xff").boolean(true).none().end_list();
    p.str("t").integer(1).integer(2).tuple2();
    p.str("f").real(1.5);
    p.end_dict();
    uint32_t memo = p.memoize();
    EXPECT_EQ(memo, 0u);
    p.get(memo);
    std::string s = bytes_of(p);
    std::string expected = std::string("}(\x8c\x01k](X\x2c\x01\x00\x00", 12) + std::string(300, 'x') +
                           "\x8c\x03\xef\xbf\xbd"
                           "\x88"
                           "N"
                           "e"
                           "\x8c\x01t"
                           "K\x01"
                           "K\x02"
                           "\x86"
                           "\x8c\x01"
                           "f" +
                           std::string("G\x3f\xf8\x00\x00\x00\x00\x00\x00", 9) +
                           "u"
                           "\x94"
                           "h" +
                           std::string(1, '\0');
    EXPECT_EQ(s, expected);
}

// --- the command line ---------------------------------------------------------------------------

using Result = test::CliResult;

TEST(PhasesCli, HelpOfTheNewCommands) {
    std::string general = test::run_cli("--help").out;
    for (const char* cmd : {"phases", "diff", "merge", "plot", "export"}) {
        Result help = test::run_cli(std::string("help ") + cmd);
        EXPECT_EQ(help.rc, 0) << cmd;
        EXPECT_EQ(help.out.rfind(std::string("usage: memguard ") + cmd + " ", 0), 0u) << help.out;
        EXPECT_EQ(test::run_cli(std::string(cmd) + " --help").out, help.out) << cmd;
        EXPECT_TRUE(contains(general, std::string("  memguard ") + cmd + " ")) << cmd;
    }
}

TEST(PhasesCli, UsageErrorsExitWithTwoAndAHint) {
    for (const char* args : {"phases",
                             "phases a.mgr b.mgr",
                             "phases a.mgr --pool",
                             "phases a.mgr --marks=1",
                             "diff",
                             "diff a.mgr",
                             "diff a b c",
                             "diff a b -n 0",
                             "merge a.mgr b.mgr --run r1",
                             "merge --run 'a b'",
                             "merge --template",
                             "merge --template ''",
                             "merge --template 'x.%q.%r'",
                             "merge a --template 'r.%r'",
                             "plot a.mgr",
                             "plot a.mgr -o",
                             "plot a.mgr -o a.png",
                             "plot a.mgr -o a.svg --json",
                             "plot a.mgr b.mgr -o a.svg",
                             "export a.mgr -o a.pickle",
                             "export --perfetto a.mgr",
                             "export --perfetto --memory-viz a.mgr -o x",
                             "export --memory-viz=1 a.mgr -o x",
                             "export --memory-viz a.mgr -o x --json",
                             "export --memory-viz a.mgr -o x --frames x"}) {
        Result r = test::run_cli(args);
        EXPECT_EQ(r.rc, 2) << args;
        EXPECT_EQ(r.out.rfind("memguard: error: ", 0), 0u) << args << ": " << r.out;
        EXPECT_TRUE(contains(r.out, "\nusage: memguard ")) << args << ": " << r.out;
        EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << args << ": " << r.out;
    }
}

TEST(PhasesCli, BadReportFilesGiveOneMessage) {
    test::TempDir dir;
    std::string good = dir.write("good.mgr", test::kHeader + kMinor4 + alloc(1, "1000", 10) + "Z 2\n");
    std::string bad = dir.write("bad.mgr", "not a report\n");
    for (std::string args : {"phases '" + bad + "'", "diff '" + good + "' '" + bad + "'",
                             "merge '" + good + "' '" + bad + "'", "plot '" + bad + "' -o '" + dir.path() + "/x.svg'",
                             "export --perfetto '" + bad + "' -o '" + dir.path() + "/x.json'",
                             "diff '" + good + "' '" + dir.path() + "/missing.mgr'"}) {
        Result r = test::run_cli(args);
        EXPECT_EQ(r.rc, 2) << args;
        EXPECT_EQ(r.out.rfind("memguard: error: ", 0), 0u) << args << ": " << r.out;
        EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
    }
    EXPECT_NE(::access((dir.path() + "/x.svg").c_str(), F_OK), 0) << "a plot of a bad report left a file";
}

TEST(PhasesCli, PlotOfALongRunKeepsThePeakAndStaysSmall) {
    // 200000 events: the SVG keeps a few vertices per pixel column, and the one-event spike survives.
    test::TempDir dir;
    std::string body = test::kHeader + kMinor4;
    for (int i = 0; i < 100000; ++i) {
        char addr[32];
        std::snprintf(addr, sizeof addr, "%x", 0x100000 + i);
        body += alloc(2 * i, addr, i == 77777 ? 5000000 : 1000) + free_(2 * i + 1, addr, i == 77777 ? 5000000 : 1000);
    }
    dir.write("long.mgr", body + "Z 200000\n");
    Result r = test::run_cli("plot long.mgr -o long.svg", "cd '" + dir.path() + "' &&");
    ASSERT_EQ(r.rc, 0) << r.out;
    std::string svg = test::read_file(dir.path() + "/long.svg");
    EXPECT_LT(svg.size(), 200000u);
    EXPECT_TRUE(contains(svg, "peak 4.77 MiB at 0.000 s")) << svg.substr(0, 2000);
    // The one-event spike survives the downsampling: the live path reaches the peak marker's height.
    size_t d = svg.find(" d=\"", svg.find("id=\"live\"")) + 1;
    ASSERT_NE(d, std::string::npos);
    std::string path = svg.substr(d + 3, svg.find('"', d + 3) - d - 3);
    EXPECT_LT(std::count(path.begin(), path.end(), 'L'), 20000);
    double top = 1e9;
    for (size_t c = path.find(','); c != std::string::npos; c = path.find(',', c + 1)) {
        top = std::min(top, std::stod(path.substr(c + 1)));
    }
    size_t cy = svg.find("cy=\"", svg.find("id=\"peak\""));
    ASSERT_NE(cy, std::string::npos);
    EXPECT_DOUBLE_EQ(top, std::stod(svg.substr(cy + 4)));
}

}  // namespace
}  // namespace memguard::report

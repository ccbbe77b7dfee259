// The figures of phases and marks from the streaming reader (report/stream_phases.h) against
// phase_stats and live_at_mark over a whole report (report/timeline.h), in both series: on every
// report of golden/, on made-up ones (nested, overlapping, unended and empty phases) and on random
// ones.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "report/stream_phases.h"
#include "report/timeline.h"
#include "test_util.h"

namespace memguard::report {
namespace {

std::string text_of(const PhaseStats& s) {
    std::ostringstream o;
    o << "#" << s.index << " depth " << s.depth << " parent " << (s.parent ? std::to_string(*s.parent) : "-")
      << " occurrence " << s.occurrence << " entry " << s.entry_bytes << " peak " << s.peak_bytes << " at "
      << s.peak_events << " t " << s.peak_t << " exit " << s.exit_bytes << " end " << s.t_end;
    return o.str();
}

std::vector<std::string> text_of(const std::vector<PhaseStats>& all) {
    std::vector<std::string> out;
    for (const PhaseStats& s : all) out.push_back(text_of(s));
    return out;
}

/// What both readers say of the report `content`, series by series, compared; returns how many
/// phases and marks were compared.
size_t expect_same(const Report& full, const PhaseObserver& streamed) {
    const Timeline tl = build_timeline(full);
    for (Series series : {Series::Gpu, Series::Tensors}) {
        SCOPED_TRACE(series_name(series));
        EXPECT_EQ(text_of(phase_stats(full, tl, series)), text_of(streamed.stats(series)));
        std::vector<uint64_t> marks;
        for (const Mark& m : full.marks) marks.push_back(live_at_mark(m, tl, series));
        EXPECT_EQ(marks, streamed.mark_levels(series));
    }
    return full.phases.size() + full.marks.size();
}

size_t expect_same_text(const std::string& content) {
    Report full = parse_report(content, "t.mgr");
    PhaseObserver phases;
    stream_report_text(content, "t.mgr", phases);
    return expect_same(full, phases);
}

using test::golden_reports;

TEST(StreamPhases, EveryGoldenReportGivesThePhasesOfLoadReport) {
    std::vector<std::string> paths = golden_reports();
    ASSERT_GE(paths.size(), 40u);
    size_t reports = 0, compared = 0;
    for (const std::string& path : paths) {
        SCOPED_TRACE(path);
        std::optional<Report> full;
        try {
            full = load_report(path);
        } catch (const ReportError&) {
            continue;  // stream_test checks that both readers refuse the same files
        }
        PhaseObserver phases;
        stream_report(path, phases);
        compared += expect_same(*full, phases);
        ++reports;
    }
    EXPECT_GE(reports, 30u);
    EXPECT_GE(compared, 20u);  // train.mgr, ddp.*.mgr, alloc*.mgr, phase_warnings.mgr have phases and marks
}

// --- made-up reports ---------------------------------------------------------------------------

const std::string kMinor5 = "MEMGUARD-REPORT 1\nI format_minor 5\n";

std::string hex_addr(uint64_t a) {
    std::ostringstream o;
    o << std::hex << a;
    return o.str();
}

std::string alloc(int64_t t, uint64_t addr, uint64_t size) {
    return "A " + std::to_string(t) + " 1 " + hex_addr(addr) + " " + std::to_string(size) +
           " device cudaMalloc 0 - 0 0 0\n";
}
std::string free_(int64_t t, uint64_t addr, uint64_t size) {
    return "F " + std::to_string(t) + " 1 " + hex_addr(addr) + " " + std::to_string(size) + " cudaFree -\n";
}
std::string tensor(int64_t t, uint64_t addr, uint64_t size) {
    return "T " + std::to_string(t) + " 1 " + hex_addr(addr) + " " + std::to_string(size) + " " + std::to_string(size) +
           " 0 0 0 0 0 -\n";
}
std::string tensor_free(int64_t t, uint64_t addr) { return "t " + std::to_string(t) + " 1 " + hex_addr(addr) + " 0\n"; }
std::string begin(int64_t t, uint64_t tid, uint32_t id, const char* source, const std::string& name) {
    return "B " + std::to_string(t) + " " + std::to_string(tid) + " " + std::to_string(id) + " " + source + " " + name +
           "\n";
}
std::string end(int64_t t, uint64_t tid, uint32_t id) {
    return "b " + std::to_string(t) + " " + std::to_string(tid) + " " + std::to_string(id) + "\n";
}
std::string mark(int64_t t, const std::string& name) { return "J " + std::to_string(t) + " 1 api " + name + "\n"; }

TEST(StreamPhases, NestedPhasesInBothSeries) {
    // outer [ inner [ peak ] inner again [ ] ] then a tensor peak after the outer ended.
    std::string r = kMinor5;
    r += alloc(1, 0x1000, 100) + tensor(2, 0x9000, 10);
    r += begin(3, 1, 1, "api", "outer") + mark(3, "m0");
    r += alloc(4, 0x2000, 300) + begin(5, 1, 2, "api", "inner") + tensor(6, 0x9100, 50);
    r += alloc(7, 0x3000, 1000) + free_(8, 0x3000, 1000) + alloc(9, 0x3000, 1000);  // the peak twice: the first counts
    r += end(10, 1, 2) + free_(11, 0x3000, 1000) + begin(12, 1, 3, "api", "inner") + mark(12, "m1");
    r += tensor_free(13, 0x9100) + end(14, 1, 3) + end(15, 1, 1);
    r += tensor(16, 0x9200, 500) + mark(17, "m2") + "Z 20\n";
    EXPECT_EQ(expect_same_text(r), 6u);
    Report full = parse_report(r, "t.mgr");
    PhaseObserver phases;
    stream_report_text(r, "t.mgr", phases);
    const std::vector<PhaseStats>& gpu = phases.stats(Series::Gpu);
    ASSERT_EQ(gpu.size(), 3u);
    EXPECT_EQ(gpu[0].peak_bytes, 1400u);
    EXPECT_EQ(gpu[0].peak_t, 7);  // the first time the peak was reached
    EXPECT_EQ(gpu[1].depth, 1);
    EXPECT_EQ(gpu[1].parent.value_or(0), 1u);
    EXPECT_EQ(gpu[2].occurrence, 1u);
    EXPECT_EQ(gpu[2].peak_bytes, 400u);
    const std::vector<PhaseStats>& tensors = phases.stats(Series::Tensors);
    EXPECT_EQ(tensors[0].entry_bytes, 10u);
    EXPECT_EQ(tensors[0].peak_bytes, 60u);
    EXPECT_EQ(phases.mark_levels(Series::Tensors), (std::vector<uint64_t>{10, 60, 510}));
}

TEST(StreamPhases, OverlappingThreadsRangesUnendedAndEmptyPhases) {
    std::string r = kMinor5;
    r += begin(1, 1, 1, "api", "a") + alloc(2, 0x1000, 100);
    r += begin(3, 2, 2, "nvtx", "b") + alloc(4, 0x2000, 200);  // another thread: depth 0
    r += end(5, 1, 1) + alloc(6, 0x3000, 400);                 // a ends first, b goes on
    r += begin(7, 1, 3, "nvtx_range", "r1") + begin(8, 2, 4, "nvtx_range", "r2");
    r += free_(9, 0x3000, 400) + end(10, 2, 3);                    // r1 ends on another thread, before r2
    r += begin(11, 1, 5, "api", "empty") + end(11, 1, 5);          // no event inside
    r += begin(12, 1, 6, "api", "never") + alloc(13, 0x4000, 50);  // never ended
    r += end(14, 2, 2) + free_(15, 0x1000, 100) + begin(16, 3, 7, "api", "after the last event");
    r += "Z 20\n";
    EXPECT_EQ(expect_same_text(r), 7u);
}

TEST(StreamPhases, PhasesEndedInEveryOrder) {
    // Many open phases ended first-begun first, last-begun first, and alternately: the tree over
    // the open phases, its rebuilds, and stretches joined both ways.
    for (int order = 0; order < 3; ++order) {
        SCOPED_TRACE(order);
        std::string r = kMinor5;
        const uint32_t n = 300;
        int64_t t = 1;
        std::mt19937 rng(7 + order);
        for (uint32_t i = 1; i <= n; ++i) {
            r += begin(t++, 1, i, "api", "p" + std::to_string(i % 7));
            const uint64_t size = 1 + rng() % 10;  // what stays, and a spike in this phase's stretch
            r += alloc(t++, 0x100000 + i * 0x1000, size);
            const uint64_t spike = rng() % 100000;
            r += alloc(t, 0x80000000, spike) + free_(t + 1, 0x80000000, spike);
            t += 2;
        }
        std::vector<uint32_t> ids;
        for (uint32_t i = 1; i <= n; ++i) ids.push_back(i);
        if (order == 1) std::reverse(ids.begin(), ids.end());
        if (order == 2) std::shuffle(ids.begin(), ids.end(), rng);
        for (uint32_t id : ids) {
            r += end(t++, 1, id);
            const uint64_t spike = rng() % 100000;
            r += alloc(t, 0x80000000, spike) + free_(t + 1, 0x80000000, spike);
            t += 2;
            if (rng() % 2 == 0) r += begin(t++, 1, n + id, "api", "late");
        }
        r += "Z " + std::to_string(t) + "\n";
        EXPECT_GE(expect_same_text(r), n);
    }
}

TEST(StreamPhases, RandomReports) {
    std::mt19937 rng(2026);
    for (int round = 0; round < 200; ++round) {
        SCOPED_TRACE(round);
        std::string r = kMinor5;
        std::vector<std::pair<uint64_t, uint64_t>> blocks, tensors;  // (addr, size) live
        std::vector<uint32_t> open;
        uint32_t next_id = 1;
        uint64_t next_addr = 0x10000;
        int64_t t = 0;
        // A few long ones: many phases open at once, the tree rebuilt at many sizes.
        const int records = static_cast<int>(round < 10 ? 4000 : rng() % 120);
        const char* sources[] = {"api", "nvtx", "nvtx_range"};
        for (int k = 0; k < records; ++k) {
            t += rng() % 3;  // times repeat
            switch (rng() % 8) {
            case 0:
            case 1: {
                const uint64_t size = rng() % 4 == 0 ? 0 : rng() % 100;
                blocks.emplace_back(next_addr, size);
                r += alloc(t, next_addr, size);
                next_addr += 0x1000;
                break;
            }
            case 2:
                if (!blocks.empty()) {
                    size_t i = rng() % blocks.size();
                    r += free_(t, blocks[i].first, blocks[i].second);
                    blocks.erase(blocks.begin() + static_cast<long>(i));
                }
                break;
            case 3: {
                const uint64_t size = rng() % 100;
                tensors.emplace_back(next_addr, size);
                r += tensor(t, next_addr, size);
                next_addr += 0x1000;
                break;
            }
            case 4:
                if (!tensors.empty()) {
                    size_t i = rng() % tensors.size();
                    r += tensor_free(t, tensors[i].first);
                    tensors.erase(tensors.begin() + static_cast<long>(i));
                }
                break;
            case 5:
                open.push_back(next_id);
                r += begin(t, 1 + rng() % 3, next_id++, sources[rng() % 3], "n" + std::to_string(rng() % 4));
                break;
            case 6:
                if (!open.empty() && (records < 4000 || rng() % 2 == 0)) {
                    size_t i = rng() % 2 == 0 ? open.size() - 1 : rng() % open.size();
                    r += end(t, 1 + rng() % 3, open[i]);
                    open.erase(open.begin() + static_cast<long>(i));
                }
                break;
            case 7: r += mark(t, "m"); break;
            }
        }
        if (rng() % 2 == 0) r += "Z " + std::to_string(t + 1) + "\n";
        expect_same_text(r);
    }
}

// --- the commands: a streamed read against load_report's (a pipe) ------------------------------

/// A report whose GPU peak keeps coming back with many blocks live (PeakObserver gives up: diff
/// reads it a second time), with phases, marks and, when `tensors`, allocator mode's T records.
std::string returning_peak_report(bool tensors) {
    std::string r = kMinor5 + "S 1 7f00\nS 2 7f10\n";
    auto a = [](int64_t t, uint64_t addr, uint64_t size, int stack) {
        return "A " + std::to_string(t) + " 1 " + hex_addr(addr) + " " + std::to_string(size) +
               " device cudaMalloc 0 - " + std::to_string(stack) + " 0 0\n";
    };
    int64_t t = 1;
    r += begin(t++, 1, 1, "api", "warm up");
    for (uint64_t i = 0; i < 2000; ++i) r += a(t++, 0x100000000 + i * 0x10000, 4096, 1 + static_cast<int>(i % 2));
    r += end(t, 1, 1) + mark(t, "warm") + begin(t, 1, 2, "api", "churn");
    ++t;
    // Each round frees the oldest block and allocates a bigger one: a new peak at every round.
    for (uint64_t i = 0; i < 3000; ++i) {
        r += free_(t++, 0x100000000 + i * 0x10000, i < 2000 ? 4096 : 4096 + (i - 2000) + 1);
        r += a(t++, 0x100000000 + (i + 2000) * 0x10000, 4096 + i + 1, 1 + static_cast<int>(i % 2));
        if (tensors) {
            r += tensor(t++, 0x900000000 + i * 0x1000, 64 + i % 7);
            if (i % 3 != 0) r += tensor_free(t++, 0x900000000 + i * 0x1000);
        }
        if (i % 500 == 0) r += begin(t, 2, 100 + static_cast<uint32_t>(i), "nvtx", "step") + mark(t, "tick");
        if (i % 500 == 250) r += end(t, 2, 100 + static_cast<uint32_t>(i - 250));
    }
    return r + end(t, 1, 2) + "Z " + std::to_string(t + 1) + "\n";
}

TEST(StreamPhases, DiffAndPhasesReadStreamedAsLoadReportReadsThem) {
    test::TempDir dir;
    const std::string gpu = dir.write("gpu.mgr", returning_peak_report(false));
    const std::string alloc = dir.write("alloc.mgr", returning_peak_report(true));
    // The other side of a diff: the same, under another name (the names of A are replaced).
    const std::string gpu_b = dir.write("gpu_b.mgr", returning_peak_report(false));
    const std::string alloc_b = dir.write("alloc_b.mgr", returning_peak_report(true));
    // diff reads a pipe with load_report, a file with the streaming reader (gpu.mgr's peak in a
    // second pass): only the names differ. phases streams both: the same output from a pipe.
    auto both = [&](const std::string& args, const std::string& file, const std::string& other) {
        SCOPED_TRACE(args + " " + file + " " + other);
        test::CliResult streamed = test::run_cli(args + " '" + file + "' " + other);
        test::CliResult loaded = test::run_cli(args + " /dev/stdin " + other, "cat '" + file + "' |");
        std::string expected = streamed.out;
        for (size_t at = 0; (at = expected.find(file, at)) != std::string::npos;) {
            expected.replace(at, file.size(), "/dev/stdin");
            at += 10;
        }
        EXPECT_EQ(streamed.rc, loaded.rc);
        EXPECT_EQ(expected, loaded.out);
        EXPECT_GT(streamed.out.size(), 200u) << streamed.out;
    };
    for (const std::string& b : {gpu_b, alloc_b}) {
        for (const std::string& a : {gpu, alloc}) {
            both("diff -n 50", a, "'" + b + "'");
            both("diff --json --segments", a, "'" + b + "'");
            both("diff --fail-if 'phase[churn].peak>+1%' --fail-if 'tensor_peak>0'", a, "'" + b + "'");
        }
        for (const char* args : {"phases", "phases --json", "phases --marks", "phases --segments --marks --json"}) {
            both(args, b == gpu_b ? gpu : alloc, "");
        }
    }
}

}  // namespace
}  // namespace memguard::report

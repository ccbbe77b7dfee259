// The streaming reader's observers of out-of-memory records and collections (report/stream_oom.h)
// against load_report: the same OOMs, figures, categories at each OOM, and tensors freed in each
// collection, on every report of golden/ and on made-up ones; and the cases where the stream cannot
// tell (a report written out of time order) say so, for load_report to answer.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "report/categories.h"
#include "report/oom.h"
#include "report/stream.h"
#include "report/stream_oom.h"
#include "test_util.h"

namespace memguard::report {
namespace {

template <typename T>
std::string opt(const std::optional<T>& v) {
    return v ? std::to_string(*v) : "-";
}

/// Every field of an OOM; the point only where it is used (not recovered; `point`: asked for).
std::string text_of(const OomEvent& e, bool point = true) {
    std::ostringstream o;
    o << format::name_of(e.source) << " recovered " << e.recovered << " x " << opt(e.context) << " E " << opt(e.failure)
      << " O " << opt(e.tensor_oom) << " t " << e.t << " tid " << e.tid << " dev " << e.device << " req "
      << opt(e.requested) << " rounded " << e.rounded << " stream " << opt(e.stream) << " stacks " << e.stack_id << "/"
      << e.python_stack_id << " cuda";
    for (size_t i : e.cuda_failures) o << " " << i;
    if (!e.recovered && point) o << " at " << e.events_before;
    return o.str();
}

std::string text_of(const std::vector<OomEvent>& v, bool points = true) {
    std::string s;
    for (const OomEvent& e : v) s += text_of(e, points) + "\n";
    return s;
}

std::string text_of(const OomFigures& f) {
    std::ostringstream o;
    o << f.request << " total " << opt(f.device_total) << " free " << opt(f.device_free) << " limit " << opt(f.limit)
      << " this " << f.this_process << " others " << opt(f.others) << " alloc " << opt(f.allocated) << " reserved "
      << opt(f.reserved) << " cached " << opt(f.cached_free) << " largest " << opt(f.largest_free) << " from "
      << f.largest_free_from << " frag " << opt(f.fragmentation) << " step " << opt(f.step) << " pending "
      << f.compile_pending << " capturing " << f.capturing << " phases";
    for (size_t i : f.open_phases) o << " " << i;
    o << " collections";
    for (size_t i : f.collections) o << " " << i;
    for (const auto& [label, bytes] : f.saved) o << " saved " << label << "=" << bytes;
    return o.str();
}

std::string text_of(const Breakdown& b) {
    std::ostringstream o;
    o << b.total << ":";
    for (const CategoryPart& p : b.parts) {
        o << " " << part_label(p) << "=" << p.bytes << "," << p.blocks << "," << p.estimated_bytes;
        for (const Site& s : p.sites) o << "[" << s.stack_id << "/" << s.python_stack_id << "=" << s.bytes << "]";
    }
    return o.str();
}

std::string text_of(const CollectionFrees& f) {
    std::ostringstream o;
    for (size_t c = 0; c < f.by_site.size(); ++c) {
        for (const auto& [key, s] : f.by_site[c]) {
            o << c << ": " << s.stack_id << "/" << s.python_stack_id << " " << s.bytes << " " << s.requested << " "
              << s.blocks << "\n";
        }
    }
    o << "unattributed " << f.unattributed << "\n";
    return o.str();
}

struct Compared {
    bool streamed = false;  // the stream answered (no fallback)
    size_t ooms = 0, recovered = 0;
};

/// Both readers on `path`: the OOMs, the figures and categories of each that is not recovered (where
/// the streamed report can give them: no steps or moments), and the collections' freed tensors.
Compared compare(const std::string& path) {
    Compared out;
    SCOPED_TRACE(path);
    const Report full = load_report(path);
    const std::vector<OomEvent> want = find_ooms(full);
    OomObserver points(true), counts(false);
    CollectionFreesObserver frees;
    Observers all({&points, &counts, &frees});
    const Report r = stream_report(path, all);
    EXPECT_EQ(full.warnings, r.warnings);
    EXPECT_EQ(text_of(collection_frees(full)), text_of(frees.take()));
    std::optional<std::vector<OomEvent>> counted = counts.ooms(r);
    std::optional<std::vector<OomEvent>> got = points.ooms(r);
    if (got) {
        EXPECT_TRUE(counted);  // what the points need includes what the counts need
    }
    if (counted) {
        EXPECT_EQ(text_of(want, false), text_of(*counted, false));
    }
    if (!got) return out;
    out.streamed = true;
    EXPECT_EQ(text_of(want), text_of(*got));
    if (want.size() != got->size()) return out;
    const bool positions = !r.steps.empty() || !r.moments.empty();
    for (size_t i = 0; i < want.size(); ++i) {
        ++(want[i].recovered ? out.recovered : out.ooms);
        if (want[i].recovered) continue;
        EXPECT_EQ(text_of(oom_figures(full, want[i])), text_of(points.figures(r, (*got)[i]))) << i;
        if (positions) continue;  // categories with steps or moments: load_report (cmd_oom.cpp)
        BreakdownOptions options;
        options.device = want[i].device;
        const Report at = points.point_report(r, (*got)[i]);
        EXPECT_EQ(text_of(breakdown_at(full, want[i].events_before, options)),
                  text_of(breakdown_at(at, at.events.size(), options)))
            << i;
    }
    return out;
}

using test::golden_reports;

TEST(StreamOom, EveryGoldenReportGivesTheOomsFiguresAndCollectionsLoadReportGives) {
    std::vector<std::string> paths = golden_reports();
    ASSERT_GE(paths.size(), 40u);
    size_t ooms = 0, recovered = 0, streamed = 0;
    for (const std::string& path : paths) {
        try {
            load_report(path);
        } catch (const ReportError&) {
            continue;  // stream_test.cpp compares the errors
        }
        Compared c = compare(path);
        streamed += c.streamed ? 1 : 0;
        ooms += c.ooms;
        recovered += c.recovered;
    }
    // The OOM reports of golden/ stream, and hold both kinds.
    EXPECT_GT(streamed, 40u);
    EXPECT_GE(ooms, 6u);
    EXPECT_GE(recovered, 1u);
}

std::string write_report(const std::string& body) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string path = ::testing::TempDir() + "stream_oom_test." + std::to_string(getpid()) + "." +
                       (info ? info->name() : "none") + ".mgr";
    FILE* f = fopen(path.c_str(), "w");
    fputs((test::kHeader + body).c_str(), f);
    fclose(f);
    return path;
}

std::string n(int64_t v) { return std::to_string(v); }

std::string alloc(int64_t t, uint64_t tid, uint64_t addr, uint64_t size, uint32_t stack = 0) {
    return "A " + n(t) + " " + n(tid) + " " + n(addr) + " " + n(size) + " device cudaMalloc 0 - " + n(stack) + " 0 0\n";
}
std::string free_(int64_t t, uint64_t tid, uint64_t addr) {
    return "F " + n(t) + " " + n(tid) + " " + n(addr) + " 0 cudaFree -\n";
}
std::string failure(int64_t t, uint64_t tid, uint64_t size) {
    return "E " + n(t) + " " + n(tid) + " " + n(size) + " device cudaMalloc 0 - 0 2 0 0\n";
}
std::string oom_x(int64_t t, uint64_t tid, const char* source, uint64_t size) {
    return "x " + n(t) + " " + n(tid) + " 0 " + source + " - " + n(size) + " - 100000 1000000 - - 0 0 0 0 0\n";
}
std::string tensor(int64_t t, uint64_t tid, uint64_t addr, uint64_t size, uint32_t stack) {
    return "T " + n(t) + " " + n(tid) + " " + n(addr) + " " + n(size) + " " + n(size - 4) + " 0 0 " + n(stack) +
           " 0 0 -\n";
}
std::string tensor_free(int64_t t, uint64_t tid, uint64_t addr, bool gc) {
    return "t " + n(t) + " " + n(tid) + " " + n(addr) + (gc ? " 1\n" : " 0\n");
}
std::string collection(int64_t t, uint64_t tid) { return "Y " + n(t) + " " + n(tid) + " automatic 0 5 1 0 - - -\n"; }

TEST(StreamOom, SeveralOomsOnTwoThreadsRecoveredFailuresAndOlderRecords) {
    std::string body = "I format_minor 8\nS 1 0\nS 2 0\n";
    int64_t t = 1000;
    for (int i = 0; i < 40; ++i) {
        body += alloc(t += 10, 1 + i % 2, 0x100000 + 0x1000 * i, 1000 + 10 * i, 1 + i % 2);
        if (i % 3 == 0) body += free_(t += 10, 1 + i % 2, 0x100000 + 0x1000 * i);
        if (i == 10) {  // torch's, a failure before it
            t += 10;
            body += failure(t, 1, 5000) + oom_x(t, 1, "torch", 5000);
        }
        if (i == 20) {  // another thread's
            t += 10;
            body += failure(t, 2, 6000) + oom_x(t, 2, "cuda", 6000);
        }
        if (i == 25) {
            body += failure(t += 10, 1, 700);  // recovered: the retry follows on its thread
            body += alloc(t += 10, 1, 0x900000, 800);
        }
        if (i == 30) body += failure(t += 10, 2, 9000);  // an older report's E with no x
    }
    body += "Z " + n(t + 10) + "\n";
    const std::string path = write_report(body);
    Compared c = compare(path);
    EXPECT_TRUE(c.streamed);
    EXPECT_EQ(c.ooms, 3u);
    EXPECT_EQ(c.recovered, 1u);
}

TEST(StreamOom, AllocatorModeOomsAndCollectionsThatFreeTensors) {
    // Tensors in segments (the figures' free gaps), O records with and without x, tensors freed in
    // collections on two threads, and gc frees that no Y claims.
    std::string body = "I format_minor 8\nI allocator memguard\nS 1 0\nS 2 0\nS 3 0\n";
    int64_t t = 1000;
    body += alloc(t += 10, 1, 0x100000, 0x100000);
    body += alloc(t += 10, 1, 0x300000, 0x100000);
    for (int i = 0; i < 30; ++i) {
        const uint64_t tid = 1 + i % 2;
        body += tensor(t += 10, tid, 0x100000 + 0x2000 * i, 0x1000 + 0x100 * (i % 4), 1 + i % 3);
        if (i % 4 == 1) body += tensor_free(t += 10, tid, 0x100000 + 0x2000 * (i - 1), true);
        if (i % 5 == 4) body += collection(t += 10, tid);
        if (i == 12) body += "O " + n(t += 10) + " 1 0 4096 4096 8192 16384 0 0 0 cache\n";
        if (i == 18) {
            body += "O " + n(t += 10) + " 2 0 8192 8192 8192 16384 0 0 0 gc\n";
            body += "x " + n(t) + " 2 0 allocator 8192 8192 - - - - - 0 0 0 0 0\n";
        }
    }
    body += tensor_free(t += 10, 1, 0x100000 + 0x2000 * 29, true);  // no Y after it on its thread
    body += "Z " + n(t + 10) + "\n";
    const std::string path = write_report(body);
    const Report full = load_report(path);
    ASSERT_GT(full.collections.size(), 3u);
    const CollectionFrees whole = collection_frees(full);
    EXPECT_EQ(whole.unattributed, 1u);
    size_t with_frees = 0;
    for (const auto& sites : whole.by_site) with_frees += sites.empty() ? 0 : 1;
    EXPECT_GE(with_frees, 3u);
    Compared c = compare(path);
    EXPECT_TRUE(c.streamed);
    EXPECT_EQ(c.ooms, 2u);
}

TEST(StreamOom, APointBehindItsRecordIsLeftToLoadReport) {
    // The E is written after an event later than its time (another thread's record came first): its
    // point lies behind it, which the stream did not keep; the retry window is complete.
    const std::string body = "I format_minor 8\n" + alloc(100, 1, 0x1000, 64) + alloc(300, 2, 0x2000, 64) +
                             failure(200, 1, 4096) + alloc(400, 2, 0x3000, 64) + "Z 500\n";
    const std::string path = write_report(body);
    OomObserver points(true), counts(false);
    Observers both({&points, &counts});
    const Report r = stream_report(path, both);
    EXPECT_FALSE(points.ooms(r));
    ASSERT_TRUE(counts.ooms(r));  // summary's counts need no point
    EXPECT_EQ(text_of(find_ooms(load_report(path)), false), text_of(*counts.ooms(r), false));
}

TEST(StreamOom, ABlockOfTheRetryWindowReadBeforeTheFailureIsLeftToLoadReport) {
    // The thread's retry (t=210) is written before its failure (t=200): the window was not kept.
    const std::string body = "I format_minor 8\n" + alloc(100, 1, 0x1000, 64) + alloc(210, 1, 0x2000, 8192) +
                             failure(200, 1, 4096) + "Z 500\n";
    const std::string path = write_report(body);
    OomObserver counts(false);
    const Report r = stream_report(path, counts);
    EXPECT_FALSE(counts.ooms(r));
    const std::vector<OomEvent> whole = find_ooms(load_report(path));
    ASSERT_EQ(whole.size(), 1u);
    EXPECT_TRUE(whole[0].recovered);
}

TEST(StreamOom, ManyRecoveredFailuresKeepNoLiveSet) {
    // PyTorch freeing its cache and retrying, again and again: each copy of the live set goes when
    // its retry is read, and the one OOM at the end keeps its own.
    std::string body = "I format_minor 8\n";
    int64_t t = 1000;
    for (int i = 0; i < 200; ++i) body += alloc(t += 10, 1, 0x100000 + 0x1000 * i, 512);
    for (int i = 0; i < 300; ++i) {
        t += 2 * kRetryWindowNs;  // apart from each other and from the OOM at the end
        t += 10;
        body += failure(t, 1, 4096) + oom_x(t, 1, "cuda", 4096);
        body += alloc(t += 10, 1, 0x900000 + 0x10000 * i, 4096);
        body += free_(t += 10, 1, 0x900000 + 0x10000 * i);
    }
    t += 2 * kRetryWindowNs;
    t += 10;
    body += failure(t, 1, 1 << 20) + oom_x(t, 1, "torch", 1 << 20) + "Z " + n(t + 10) + "\n";
    const std::string path = write_report(body);
    OomObserver points(true);
    stream_report(path, points);
    EXPECT_EQ(points.live_sets_kept(), 1u);  // the OOM's (its x and the E before it share it)
    Compared c = compare(path);
    EXPECT_TRUE(c.streamed);
    EXPECT_EQ(c.recovered, 300u);
    EXPECT_EQ(c.ooms, 1u);
}

}  // namespace
}  // namespace memguard::report

// The streaming reader (report/stream.h) against load_report: the same summary, warnings and small
// records, and at every point (peaks, exit, times) the same live set, sites and categories, on
// every report of golden/ and on edge cases of the block records.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/categories.h"
#include "report/stream.h"
#include "report/user_frame.h"
#include "test_util.h"

namespace memguard::report {
namespace {

std::string opt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

/// Every figure of a summary but the positions (peak_events, tensor_peak_events), one per line.
std::string text_of(const Summary& s) {
    std::ostringstream o;
    o << "allocations " << s.allocations << " frees " << s.frees << " failed_frees " << s.failed_frees << " failed "
      << s.failed_allocations << " oom " << s.oom_events << "\n";
    o << "peak " << s.peak_bytes << " at " << opt(s.peak_t) << " live " << s.live_bytes_at_exit << " in "
      << s.live_blocks_at_exit << " duration " << s.duration_ns << " complete " << s.complete << "\n";
    for (const KindStats& k : s.by_kind) {
        o << "kind " << k.allocations << " " << k.frees << " " << k.bytes_allocated << " " << k.peak_bytes << " "
          << opt(k.peak_t) << " " << k.live_bytes_at_exit << " " << k.live_blocks_at_exit << "\n";
    }
    for (const auto& [dev, d] : s.by_device) {
        o << "device " << dev << " " << d.allocations << " " << d.bytes_allocated << " " << d.failed_allocations << " "
          << d.oom_events << " " << d.peak_bytes << " " << opt(d.peak_t) << " " << d.live_bytes_at_exit << " "
          << d.live_blocks_at_exit << " " << d.live_handles_at_exit << "\n";
    }
    o << "graphs " << s.captures << " " << s.graphs_alive_at_exit << " " << s.execs << " " << s.execs_alive_at_exit
      << " " << s.launches << " hazards " << s.unsafe_calls << " " << s.frees_while_graph_alive << " "
      << s.warmup_retention << "\n";
    for (size_t i = 0; i < kTriggerCount; ++i) o << "gc " << s.collections[i] << " " << s.cuda_bytes_freed[i] << "\n";
    const VirtualStats& v = s.virt;
    o << "virt " << v.any << " " << v.reserves << " " << v.address_frees << " " << v.creates << " " << v.releases << " "
      << v.maps << " " << v.unmaps << " " << v.reserved_bytes << " " << v.mapped_bytes << " " << v.physical_bytes << " "
      << v.physical_device_bytes << " " << v.physical_handles << " " << v.physical_device_handles << " "
      << v.peak_reserved_bytes << " " << v.peak_mapped_bytes << " " << v.peak_physical_bytes << " "
      << opt(v.peak_mapped_t) << " " << opt(v.peak_physical_t) << "\n";
    o << "tensors " << s.tensor_allocations << " " << s.tensor_frees << " " << s.tensor_gc_frees << " "
      << s.tensor_peak_bytes << " " << s.tensor_peak_requested << " " << opt(s.tensor_peak_t) << " "
      << s.tensor_live_bytes_at_exit << " " << s.tensor_live_blocks_at_exit << " " << s.tensor_oom_events << "\n";
    return o.str();
}

std::string text_of(const SiteTable& t) {
    std::ostringstream o;
    o << t.total_bytes << " " << t.total_blocks << " " << t.total_handles << " " << t.total_requested << ":";
    for (const Site& s : t.sites) {
        o << " " << s.stack_id << "/" << s.python_stack_id << "/" << s.physical << "=" << s.bytes << "," << s.blocks
          << "," << s.requested;
    }
    return o.str();
}

std::string text_of(const Breakdown& b) {
    std::ostringstream o;
    o << b.total << " t=" << b.t << ":";
    for (const CategoryPart& p : b.parts) {
        o << " " << part_label(p) << "=" << p.bytes << "," << p.blocks << "," << p.estimated_bytes;
        for (const Site& s : p.sites) o << "[" << s.stack_id << "/" << s.python_stack_id << "=" << s.bytes << "]";
    }
    return o.str();
}

/// The blocks and tensors of a live set, as (order, addr, size) in order.
std::string items_of(const Report& r, const LiveSet& live) {
    std::ostringstream o;
    for (size_t b : live.blocks) o << " b" << r.blocks[b].addr << ":" << r.blocks[b].size << ":" << r.blocks[b].t_alloc;
    for (size_t h : live.handles) o << " h" << h;
    for (size_t i : live.tensors) o << " x" << r.tensors[i].addr << ":" << r.tensors[i].size;
    return o.str();
}

/// Compares the point of a whole report with the report of that point from the streaming reader.
void expect_same_views(const Report& full, const LiveSet& full_live, const Report& at, const LiveSet& live) {
    EXPECT_EQ(items_of(full, full_live), items_of(at, live));
    for (KindFilter f : {KindFilter::Gpu, KindFilter::All, KindFilter::Pinned, KindFilter::Physical}) {
        EXPECT_EQ(text_of(group_by_site(full, full_live, f)), text_of(group_by_site(at, live, f)));
    }
    EXPECT_EQ(text_of(group_tensors_by_site(full, full_live)), text_of(group_tensors_by_site(at, live)));
    // Categories read the positions of steps and moments, which the report of a point does not keep.
    if (full.steps.empty() && full.moments.empty()) {
        BreakdownOptions o;
        Breakdown a = breakdown_at(full, full_live.events_applied, o);
        Breakdown b = breakdown_at(at, live.events_applied, o);
        if (live.events_applied == 0) a.t = 0;  // nothing live: no event of the point carries its time
        EXPECT_EQ(text_of(a), text_of(b));
    }
}

/// Compares the point of a whole report (after `full_live.events_applied` events, or before the
/// first event later than `after_t`) with the streaming reader's.
void expect_same_point(const std::string& path, const Report& full, const LiveSet& full_live,
                       std::optional<size_t> events, std::optional<int64_t> after_t, const std::string& what) {
    SCOPED_TRACE(path + " at " + what);
    PointObserver point(events, after_t, false);
    Report streamed = stream_report(path, point);
    LiveSet live;
    Report at = point.take(std::move(streamed), full_live.t, live);
    expect_same_views(full, full_live, at, live);
}

using test::golden_reports;

TEST(Stream, EveryGoldenReportReadsAsLoadReportReadsIt) {
    std::vector<std::string> paths = golden_reports();
    ASSERT_GE(paths.size(), 40u);
    size_t compared = 0, with_backward = 0;
    for (const std::string& path : paths) {
        SCOPED_TRACE(path);
        std::optional<Report> full;
        std::string full_error;
        try {
            full = load_report(path);
        } catch (const ReportError& e) {
            full_error = e.what();
        }
        SummaryBuilder builder;
        PeakObserver peaks;
        Observers both({&builder, &peaks});
        std::string stream_error;
        std::optional<Report> streamed;
        try {
            streamed = stream_report(path, both);
        } catch (const ReportError& e) {
            stream_error = e.what();
        }
        EXPECT_EQ(full_error, stream_error);
        if (!full || !streamed) continue;
        ++compared;
        EXPECT_TRUE(streamed->streamed);
        EXPECT_TRUE(streamed->events.empty());
        EXPECT_EQ(full->warnings, streamed->warnings);
        EXPECT_EQ(full->end_t, streamed->end_t);
        EXPECT_EQ(full->complete, streamed->complete);
        EXPECT_EQ(full->has_tensors(), streamed->has_tensors());
        EXPECT_EQ(full->stacks.size(), streamed->stacks.size());
        EXPECT_EQ(full->phases.size(), streamed->phases.size());
        for (size_t i = 0; i < full->phases.size() && i < streamed->phases.size(); ++i) {
            EXPECT_EQ(full->phases[i].events_at_begin, streamed->phases[i].events_at_begin);
            EXPECT_EQ(full->phases[i].events_at_end, streamed->phases[i].events_at_end);
        }
        for (size_t i = 0; i < full->steps.size() && i < streamed->steps.size(); ++i) {
            EXPECT_EQ(full->steps[i].events_before, streamed->steps[i].events_before);
        }
        EXPECT_EQ(full->hazards.frees_while_graph_alive.size(), streamed->hazards.frees_while_graph_alive.size());
        EXPECT_FALSE(streamed->backward_pending);
        EXPECT_EQ(full->backward_sites, streamed->backward_sites);
        with_backward += full->backward_sites.empty() ? 0 : 1;
        const Summary s = summarize(*full);
        Summary t = builder.take(*streamed);
        EXPECT_EQ(text_of(s), text_of(t));
        EXPECT_EQ(s.peak_events, t.peak_events);
        EXPECT_EQ(s.tensor_peak_events, t.tensor_peak_events);

        // The live set at exit is the streamed report's blocks and tensors.
        LiveSet exit = live_at(*full, TimePoint{TimePoint::Exit, 0});
        EXPECT_EQ(exit.blocks.size(), streamed->blocks.size());
        EXPECT_EQ(exit.tensors.size(), streamed->tensors.size());

        const LiveSet peak = live_at(*full, TimePoint{TimePoint::Peak, 0}, &s);
        expect_same_point(path, *full, peak, s.peak_events, std::nullopt, "the peak");
        bool has_peak = false;
        const LiveSet tensor_peak = tensors_live_at(*full, TimePoint{TimePoint::Peak, 0}, &has_peak, &s);
        expect_same_point(path, *full, tensor_peak, s.tensor_peak_events, std::nullopt, "the tensor peak");
        // The peaks taken in the first pass.
        for (bool tensors : {false, true}) {
            SCOPED_TRACE(tensors ? "the tensor peak, first pass" : "the peak, first pass");
            ASSERT_TRUE(peaks.has(tensors, tensors ? s.tensor_peak_events : s.peak_events));
            LiveSet live;
            Report copy = *streamed;
            Report at = peaks.take(tensors, std::move(copy), (tensors ? tensor_peak : peak).t, live);
            expect_same_views(*full, tensors ? tensor_peak : peak, at, live);
        }
        expect_same_point(path, *full, exit, std::nullopt, std::nullopt, "exit");
        // Times: before everything, at every event's time (and between them) on small reports.
        std::vector<int64_t> times{-1, 0, full->end_t / 2, full->end_t};
        if (full->events.size() <= 64) {
            for (const Event& e : full->events) {
                times.push_back(e.t);
                times.push_back(e.t - 1);
            }
        }
        for (int64_t t : times) {
            expect_same_point(path, *full, live_at(*full, TimePoint{TimePoint::Time, t}), std::nullopt, t,
                              "t=" + std::to_string(t));
        }
    }
    EXPECT_GE(compared, 35u);
    EXPECT_GE(with_backward, 1u);  // the streamed attribution was compared with a real one
}

/// A report made of the header and `body`, written to a file.
std::string write_report(const std::string& body) {
    // One file per test and process: ctest runs the tests of this binary in parallel processes.
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string path = ::testing::TempDir() + "stream_test." + std::to_string(getpid()) + "." +
                       (info ? info->name() : "none") + ".mgr";
    FILE* f = fopen(path.c_str(), "w");
    fputs((test::kHeader + body).c_str(), f);
    fclose(f);
    return path;
}

TEST(Stream, RestoresDoubleAllocationsAndSlotReuseReadAsLoadReportReadsThem) {
    // A block freed and revived (R), an allocation over a live block (an implicit free), slots
    // reused many times, and tensor blocks likewise.
    std::string body = "I format_minor 5\n";
    for (int i = 0; i < 50; ++i) {
        const std::string t = std::to_string(10 * i + 1);
        body += "A " + t + " 1 " + std::to_string(0x1000 + 0x100 * (i % 7)) + " " + std::to_string(100 + i) +
                " device cudaMalloc 0 - 0 0 0\n";
        if (i % 3 == 0) body += "F " + t + " 1 " + std::to_string(0x1000 + 0x100 * (i % 7)) + " 0 cudaFree -\n";
        if (i % 9 == 0) body += "R " + t + " 1 " + std::to_string(0x1000 + 0x100 * (i % 7)) + " 900\n";
        body += "T " + t + " 1 " + std::to_string(0x9000 + 0x10 * (i % 5)) + " 64 60 0 0 0 0 0 -\n";
        if (i % 2 == 0) body += "t " + t + " 1 " + std::to_string(0x9000 + 0x10 * (i % 5)) + " 0\n";
    }
    body += "Z 1000\n";
    const std::string path = write_report(body);
    Report full = load_report(path);
    ASSERT_GT(full.blocks.size(), 40u);
    SummaryBuilder builder;
    Report streamed = stream_report(path, builder);
    EXPECT_EQ(full.warnings, streamed.warnings);
    const Summary s = summarize(full);
    EXPECT_EQ(text_of(s), text_of(builder.take(streamed)));
    EXPECT_GT(s.failed_frees, 0u);
    // Slots are reused: the streamed report never held more blocks than were live at once (plus
    // the slot of the block being freed).
    EXPECT_LT(streamed.blocks.size(), 10u);
    for (const Event& e : full.events) {
        expect_same_point(path, full, live_at(full, TimePoint{TimePoint::Time, e.t}), std::nullopt, e.t,
                          "t=" + std::to_string(e.t));
    }
    for (size_t n = 0; n <= full.events.size(); n += 7) {
        LevelWalk walk(full);
        walk.advance_to(n);
        LiveSet live;
        live.events_applied = n;
        for (size_t b = 0; b < full.blocks.size(); ++b) {
            if (walk.block_live(b)) live.blocks.push_back(b);
        }
        for (size_t i = 0; i < full.tensors.size(); ++i) {
            if (walk.tensor_live(i)) live.tensors.push_back(i);
        }
        expect_same_point(path, full, live, n, std::nullopt, std::to_string(n) + " events");
    }
}

/// A report where a Python thread (1) calls backward() and an engine thread (2) allocates without a
/// Python stack (`pairs` allocations each); the engine's are written `lag` records late.
std::string backward_report(size_t lag, int pairs = 300) {
    std::string body = "I format_minor 8\n";
    body += "p 1 10 backward /usr/lib/python3/site-packages/torch/autograd/__init__.py\n";
    body += "p 2 20 step /app/train.py\n";
    body += "P 1 1 2\nP 2 2\n";
    body += "S 1 400100\nS 2 400200\nS 3 400300\n";
    std::vector<std::pair<int64_t, std::string>> lines;  // (time written at, line)
    int64_t t = 10;
    for (int i = 0; i < pairs; ++i) {
        const bool in_backward = (i / 50) % 2 == 0;
        auto a = [&](uint64_t tid, uint32_t stack, uint32_t py, uint64_t addr) {
            return "A " + std::to_string(t) + " " + std::to_string(tid) + " " + std::to_string(addr) +
                   " 4096 device cudaMalloc 0 - " + std::to_string(stack) + " 0 " + std::to_string(py) + "\n";
        };
        lines.emplace_back(t, a(1, 1, in_backward ? 1 : 2, 0x100000 + i));
        ++t;
        // the engine thread's allocation, written `lag` records late
        lines.emplace_back(t + static_cast<int64_t>(lag), a(2, in_backward ? 2 : 3, 0, 0x900000 + i));
        ++t;
    }
    std::stable_sort(lines.begin(), lines.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [at, line] : lines) body += line;
    body += "Z " + std::to_string(t + 1000) + "\n";
    return body;
}

TEST(Stream, BackwardAttributionPutsRecordsBackInTimeOrderWithinItsWindow) {
    for (size_t lag : {size_t{0}, size_t{7}, size_t{300}}) {
        SCOPED_TRACE("lag " + std::to_string(lag));
        const std::string path = write_report(backward_report(lag));
        Report full = load_report(path);
        ASSERT_FALSE(full.backward_sites.empty());
        SummaryBuilder builder;
        Report streamed = stream_report(path, builder);
        EXPECT_FALSE(streamed.backward_pending);
        EXPECT_EQ(full.backward_sites, streamed.backward_sites);
    }
}

TEST(Stream, BackwardAttributionBeyondItsWindowSaysSo) {
    const std::string path = write_report(backward_report(4 * BackwardSweep::kWindow, 4 * BackwardSweep::kWindow));
    Report full = load_report(path);
    ASSERT_FALSE(full.backward_sites.empty());
    SummaryBuilder builder;
    Report streamed = stream_report(path, builder);
    EXPECT_TRUE(streamed.backward_pending);
    EXPECT_TRUE(streamed.backward_sites.empty());
}

TEST(Stream, APeakThatKeepsComingBackIsLeftToASecondPass) {
    // Two allocations and a free per step: every step a new peak, then a fall, over a growing live
    // set; copying it at each peak would cost the square of the events.
    std::string body;
    int64_t t = 1;
    for (int i = 0; i < 4000; ++i) {
        body += "A " + std::to_string(t++) + " 1 " + std::to_string(0x100000 + 2 * i) +
                " 100 device cudaMalloc 0 - 0\n";
        body += "A " + std::to_string(t++) + " 1 " + std::to_string(0x100000 + 2 * i + 1) +
                " 10 device cudaMalloc 0 - 0\n";
        body += "F " + std::to_string(t++) + " 1 " + std::to_string(0x100000 + 2 * i + 1) + " 0 cudaFree -\n";
    }
    body += "Z " + std::to_string(t) + "\n";
    const std::string path = write_report(body);
    SummaryBuilder builder;
    PeakObserver peaks;
    Observers both({&builder, &peaks});
    Report streamed = stream_report(path, both);
    const Summary s = builder.take(streamed);
    EXPECT_EQ(s.peak_bytes, 4000u * 100 + 10);
    EXPECT_FALSE(peaks.has(false, s.peak_events));
}

TEST(Stream, ObserversThatShareOneWalkFindWhatEachFindsOnItsOwn) {
    // Observers applies each event once to a walk that SummaryBuilder and PeakObserver share; alone,
    // each applies the events to its own.
    size_t compared = 0;
    for (const std::string& path : golden_reports()) {
        SCOPED_TRACE(path);
        SummaryBuilder shared_builder;
        PeakObserver shared_peaks;
        Observers both({&shared_builder, &shared_peaks});
        SummaryBuilder builder;
        PeakObserver peaks;
        std::optional<Report> a, b, c;
        try {
            a = stream_report(path, both);
            b = stream_report(path, builder);
            c = stream_report(path, peaks);
        } catch (const ReportError&) {
            continue;
        }
        const Summary sa = shared_builder.take(*a), sb = builder.take(*b);
        EXPECT_EQ(sa.peak_bytes, sb.peak_bytes);
        EXPECT_EQ(sa.peak_events, sb.peak_events);
        EXPECT_EQ(sa.tensor_peak_events, sb.tensor_peak_events);
        EXPECT_EQ(sa.live_bytes_at_exit, sb.live_bytes_at_exit);
        ASSERT_EQ(sa.by_device.size(), sb.by_device.size());
        for (const auto& [device, d] : sa.by_device) {
            EXPECT_EQ(d.peak_bytes, sb.by_device.at(device).peak_bytes);
            EXPECT_EQ(d.peak_t, sb.by_device.at(device).peak_t);
            EXPECT_EQ(d.allocations, sb.by_device.at(device).allocations);
        }
        for (bool tensors : {false, true}) {
            const size_t at = tensors ? sa.tensor_peak_events : sa.peak_events;
            ASSERT_EQ(shared_peaks.has(tensors, at), peaks.has(tensors, at));
            if (!peaks.has(tensors, at)) continue;
            LiveSet la, lc;
            const Report pa = shared_peaks.take(tensors, *a, 0, la);
            const Report pc = peaks.take(tensors, *c, 0, lc);
            ASSERT_EQ(pa.blocks.size(), pc.blocks.size());
            for (size_t i = 0; i < pa.blocks.size(); ++i) EXPECT_EQ(pa.blocks[i].order, pc.blocks[i].order);
            ASSERT_EQ(pa.tensors.size(), pc.tensors.size());
            for (size_t i = 0; i < pa.tensors.size(); ++i) EXPECT_EQ(pa.tensors[i].order, pc.tensors[i].order);
            ++compared;
        }
    }
    EXPECT_GE(compared, 40u);
}

TEST(Stream, ASecondPassStopsAtItsPoint) {
    std::string body;
    for (int i = 0; i < 100; ++i) {
        body += "A " + std::to_string(i + 1) + " 1 " + std::to_string(0x1000 + i) + " 10 device cudaMalloc 0 - 0\n";
    }
    body += "Z 1000\n";
    const std::string path = write_report(body);
    struct Counting : PointObserver {
        Counting() : PointObserver(size_t{5}, std::nullopt, true) {}
        size_t seen = 0;
        bool on_event(const Report& r, const Event& e) override {
            ++seen;
            return PointObserver::on_event(r, e);
        }
    } point;
    stream_report(path, point);
    EXPECT_EQ(point.seen, 6u);  // the sixth event shows the point was passed; no further line is read
}

TEST(Stream, FieldsSplitAtEverySpaceWhereverItFallsInAWord) {
    // The splitter reads eight characters at a time: a '!' right after a space looks like a space
    // to its arithmetic, and a space may fall anywhere in a word.
    std::string body;
    for (int n = 1; n <= 17; ++n)
        body += "I " + std::string(static_cast<size_t>(n), 'k') + " !" + std::to_string(n) + "!\n";
    Report r = test::parse(body + "Z 1\n");
    for (int n = 1; n <= 17; ++n) {
        EXPECT_EQ(r.info[std::string(static_cast<size_t>(n), 'k')], "!" + std::to_string(n) + "!");
    }
}

TEST(Stream, OnlyRegularFilesAreReadTwice) {
    EXPECT_TRUE(rereadable(write_report("Z 1\n")));
    EXPECT_FALSE(rereadable("/dev/null"));
    EXPECT_FALSE(rereadable(::testing::TempDir() + "no-such-report.mgr"));
}

}  // namespace
}  // namespace memguard::report

// libFuzzer harness of the report reader: the input is a report, text or binary (the corpus has
// both: the binary seeds are golden reports through `memguard export --binary`). parse_report must
// answer with a Report or a one-line ReportError naming the file; a Report goes through every
// analysis the CLI builds its answers from, whose figures must agree with each other (the
// invariants of tests/report/fuzz_test.cpp, which checks them on mutations of its own). A crash, a sanitizer
// finding, another exception, a broken invariant, a hang (-timeout) or a blow-up of memory
// (-rss_limit_mb, -malloc_limit_mb) is a finding. docs/security.md ("Kept in CI") says how to run it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "report/analysis.h"
#include "report/captures.h"
#include "report/categories.h"
#include "report/collections.h"
#include "report/report.h"
#include "report/saturate.h"
#include "report/timeline.h"

namespace {

using namespace memguard::report;

[[noreturn]] void broken(const char* what, const char* file, int line) {
    std::fprintf(stderr, "fuzz_report: invariant broken at %s:%d: %s\n", file, line, what);
    std::abort();
}

#define MG_FUZZ_CHECK(cond) ((cond) ? (void)0 : broken(#cond, __FILE__, __LINE__))

constexpr const char* kName = "fuzz.mgr";

void check_sites(const Report& r, const SiteTable& table) {
    uint64_t bytes = 0;
    for (const Site& s : table.sites) add_to(bytes, s.bytes);  // as the analyses sum: saturating
    MG_FUZZ_CHECK(bytes == table.total_bytes);
    MG_FUZZ_CHECK(table.sites.size() <= r.blocks.size() + r.handles.size() + r.tensors.size());
}

void analyse(const Report& r) {
    for (const Event& e : r.events) {
        switch (e.type) {
        case Event::Alloc:
        case Event::Free:
        case Event::Restore: MG_FUZZ_CHECK(e.block < r.blocks.size()); break;
        case Event::Reserve:
        case Event::AddressFree: MG_FUZZ_CHECK(e.block < r.reservations.size()); break;
        case Event::Create:
        case Event::Release: MG_FUZZ_CHECK(e.block < r.handles.size()); break;
        case Event::Map:
        case Event::Unmap: MG_FUZZ_CHECK(e.block < r.mappings.size()); break;
        case Event::TensorAlloc:
        case Event::TensorFree: MG_FUZZ_CHECK(e.block < r.tensors.size()); break;
        }
    }

    // summary, top: the peak, the end, a moment inside the run; every kind filter; pools.
    Summary s = summarize(r);
    MG_FUZZ_CHECK(s.peak_bytes >= s.live_bytes_at_exit);
    MG_FUZZ_CHECK(s.frees <= s.allocations);
    MG_FUZZ_CHECK(s.virt.physical_bytes <= s.virt.peak_physical_bytes);
    MG_FUZZ_CHECK(s.virt.mapped_bytes <= s.virt.peak_mapped_bytes);
    LiveSet peak = live_at(r, {TimePoint::Peak, 0}, &s);
    SiteTable peak_sites = group_by_site(r, peak, KindFilter::Gpu);
    MG_FUZZ_CHECK(peak_sites.total_bytes == s.peak_bytes);
    uint64_t pooled = 0;
    // Summed as the analyses sum (saturating at 2^64 - 1): a pool of a huge block must not wrap.
    for (const Pool& p : group_by_pool(r, peak, KindFilter::Gpu)) add_to(pooled, p.table.total_bytes);
    MG_FUZZ_CHECK(pooled == s.peak_bytes);
    LiveSet at_exit = live_at(r, {TimePoint::Exit, 0}, &s);
    MG_FUZZ_CHECK(group_by_site(r, at_exit, KindFilter::Gpu).total_bytes == s.live_bytes_at_exit);
    LiveSet middle = live_at(r, {TimePoint::Time, r.end_t / 2}, &s);
    for (KindFilter f : {KindFilter::Gpu, KindFilter::Pinned, KindFilter::All, KindFilter::Physical}) {
        for (const LiveSet* live : {&peak, &at_exit, &middle}) {
            check_sites(r, group_by_site(r, *live, f));
            for (const Pool& p : group_by_pool(r, *live, f)) check_sites(r, p.table);
        }
    }

    // Allocator mode's tensor blocks (top, diff, phases).
    for (TimePoint at :
         {TimePoint{TimePoint::Peak, 0}, TimePoint{TimePoint::Exit, 0}, TimePoint{TimePoint::Time, r.end_t / 2}}) {
        bool has_peak = false;
        LiveSet tensors = tensors_live_at(r, at, &has_peak, &s);
        SiteTable t = group_tensors_by_site(r, tensors);
        check_sites(r, t);
        MG_FUZZ_CHECK(t.total_blocks == tensors.tensors.size());
        if (at.type == TimePoint::Peak && has_peak) MG_FUZZ_CHECK(t.total_bytes == s.tensor_peak_bytes);
        if (at.type == TimePoint::Exit) MG_FUZZ_CHECK(t.total_bytes == s.tensor_live_bytes_at_exit);
        for (const Pool& p : group_tensors_by_pool(r, tensors)) check_sites(r, p.table);
    }

    // Categories (top --by category, summary, steps, oom): the parts add up to the GPU bytes live,
    // for every device and each one, at the peaks, the end, the middle and every step's end.
    std::vector<size_t> points = {s.peak_events, s.tensor_peak_events, r.events.size(), peak.events_applied / 2};
    for (const Step& st : r.steps) points.push_back(st.events_before);
    BreakdownOptions bo;
    bo.symbolizer.addr2line.clear();
    bo.symbolizer.sysroot = "/nonexistent-fuzz-root";  // no module file of the input is ever opened
    for (int device : {-1, 0}) {
        bo.device = device;
        for (const Breakdown& b : breakdowns_at(r, points, bo)) {
            uint64_t sum = 0;
            for (const CategoryPart& p : b.parts) {
                add_to(sum, p.bytes);
                MG_FUZZ_CHECK(p.bytes != 0 && p.estimated_bytes <= p.bytes && p.sites.size() <= bo.max_sites);
            }
            MG_FUZZ_CHECK(sum == b.total);
            if (device == -1 && b.events_applied == s.peak_events) MG_FUZZ_CHECK(b.total == s.peak_bytes);
        }
    }

    // graphs, hazards.
    for (const CaptureStats& c : capture_stats(r)) {
        MG_FUZZ_CHECK(c.live_owned_bytes_at_exit <= c.owned_bytes);
        for (size_t e : c.execs) MG_FUZZ_CHECK(e < r.execs.size());
    }
    for (const FreeWhileGraphAlive& h : r.hazards.frees_while_graph_alive) {
        MG_FUZZ_CHECK(!h.block || *h.block < r.blocks.size());
        MG_FUZZ_CHECK(!h.exec_index || *h.exec_index < r.execs.size());
    }
    uint64_t retained = 0;
    for (const RetentionBoundary& b : retention_boundaries(r)) retained += b.sites.size();
    MG_FUZZ_CHECK(retained <= r.hazards.warmup_retention.size());

    // cycles.
    uint64_t collections = 0;
    for (const TriggerTotals& t : collection_totals(r)) collections += t.count;
    MG_FUZZ_CHECK(collections == r.collections.size());
    for (const Collection& c : r.collections) {
        (void)collection_listed(c, false);
        (void)collection_listed(c, true);
    }

    // phases, diff, merge, plot, export: the timeline, both series.
    Timeline tl = build_timeline(r);
    MG_FUZZ_CHECK(tl.points.size() == r.events.size() + 1);
    for (Series series : {Series::Gpu, Series::Tensors}) {
        for (const PhaseStats& p : phase_stats(r, tl, series)) {
            MG_FUZZ_CHECK(p.index < r.phases.size());
            MG_FUZZ_CHECK(p.peak_bytes >= p.entry_bytes && p.peak_bytes >= p.exit_bytes);
            MG_FUZZ_CHECK(p.peak_events < tl.points.size());
        }
        for (const Mark& m : r.marks) (void)live_at_mark(m, tl, series);
        if (!r.events.empty()) {
            auto [level, at] = tl.max_level(0, r.events.size(), series);
            MG_FUZZ_CHECK(at < tl.points.size() && tl.level(at, series) == level);
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Report r;
    try {
        r = parse_report(std::string_view(reinterpret_cast<const char*>(data), size), kName);
    } catch (const ReportError& e) {
        // One line for the user, naming the file.
        std::string_view what = e.what();
        MG_FUZZ_CHECK(what.substr(0, std::string_view(kName).size()) == kName);
        MG_FUZZ_CHECK(what.find('\n') == std::string_view::npos);
        return 0;
    }
    analyse(r);
    return 0;
}

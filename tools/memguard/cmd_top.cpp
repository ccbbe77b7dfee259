// memguard top FILE [--at peak|exit|SECONDS] [--since SECONDS] [--kind gpu|pinned|physical|all] [-n N]
//              [--frames K] [--pool] [--segments] [--by site|category] [--json]
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "categories_view.h"
#include "cli.h"
#include "output.h"
#include "report/categories.h"
#include "report/json.h"
#include "report/stream.h"
#include "report/timeline.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

/// The sites shown of one table, and their frames (handles into the SiteSymbolizer).
struct Shown {
    const report::SiteTable* table = nullptr;
    std::vector<const report::Site*> sites;
    std::vector<size_t> frames;
};

/// Everything `top` prints: the moment, the sites shown and their frames.
struct TopView {
    report::LiveSet live;
    report::SiteTable table;
    bool has_peak = true;  // false when --at peak and GPU memory was never live
    bool tensors = false;  // allocator mode: the sites of the tensor blocks (T records)
    Shown all;
    std::vector<report::Pool> pools;  // --pool only
    std::vector<Shown> pool_shown;
};

Shown pick(const report::SiteTable& table, size_t top_n, SiteSymbolizer& sym) {
    Shown s;
    s.table = &table;
    for (size_t i = 0; i < table.sites.size() && i < top_n; ++i) {
        s.sites.push_back(&table.sites[i]);
        s.frames.push_back(sym.add(table.sites[i].stack_id, table.sites[i].python_stack_id));
    }
    return s;
}

/// --since: keeps what was allocated (created) at or after `since`; the rest was live before.
void keep_since(const report::Report& r, int64_t since, report::LiveSet& live) {
    auto drop = [&](std::vector<size_t>& ids, auto t_of) {
        ids.erase(std::remove_if(ids.begin(), ids.end(), [&](size_t i) { return t_of(i) < since; }), ids.end());
    };
    drop(live.blocks, [&](size_t i) { return r.blocks[i].t_alloc; });
    drop(live.handles, [&](size_t i) { return r.handles[i].t_create; });
    drop(live.tensors, [&](size_t i) { return r.tensors[i].t_alloc; });
}

/// The live set of `args.at`, and whether there was a peak, from a whole report.
void live_of(const report::Report& r, const Args& args, TopView& v) {
    // A peak needs the summary (a replay of every event): computed once.
    std::optional<report::Summary> summary;
    if (args.at.type == report::TimePoint::Peak) summary = report::summarize(r);
    const report::Summary* known = summary ? &*summary : nullptr;
    if (v.tensors) {
        v.live = report::tensors_live_at(r, args.at, &v.has_peak, known);
    } else {
        v.live = report::live_at(r, args.at, known);
        v.has_peak = !summary || summary->peak_t.has_value();
    }
}

/// Fills the view in place (it points into itself); `sym` must outlive it. `v.live` and
/// `v.has_peak` are set.
void build_view(const report::Report& r, const Args& args, SiteSymbolizer& sym, TopView& v) {
    if (args.since) keep_since(r, *args.since, v.live);
    if (v.tensors) {
        v.table = report::group_tensors_by_site(r, v.live);
        if (args.pool) v.pools = report::group_tensors_by_pool(r, v.live);
    } else {
        v.table = report::group_by_site(r, v.live, args.kind);
        if (args.pool) v.pools = report::group_by_pool(r, v.live, args.kind);
    }
    // The text of --pool shows only the pools; the JSON has the overall sites too.
    if (!args.pool || args.json) v.all = pick(v.table, args.top_n, sym);
    for (const report::Pool& p : v.pools) v.pool_shown.push_back(pick(p.table, args.top_n, sym));
    sym.resolve();
}

std::string what_text(const report::Report& r, report::KindFilter kind, bool tensors) {
    if (tensors) return "Live tensor memory (memguard allocator blocks)";
    switch (kind) {
    case report::KindFilter::Gpu: return !r.has_tensors() ? "Live GPU memory" : "Live GPU memory (allocator segments)";
    case report::KindFilter::Pinned: return "Live pinned host memory";
    case report::KindFilter::All: return "Live GPU and pinned host memory";
    case report::KindFilter::Physical: return "Live physical memory (cuMemCreate)";
    }
    return "Live memory";
}

std::string when_text(const Args& args, const TopView& v) {
    std::string t = "t=" + report::seconds_fixed3(v.live.t) + " s";
    if (args.since) t += ", allocated since " + report::seconds_fixed3(*args.since) + " s";
    switch (args.at.type) {
    case report::TimePoint::Peak:
        if (!v.has_peak)
            return v.tensors ? "at peak (tensor memory was never live)" : "at peak (GPU memory was never live)";
        return std::string(args.kind == report::KindFilter::Gpu ? "at peak" : "at the GPU peak") + " (" + t + ")";
    case report::TimePoint::Exit: return "at exit (" + t + ")";
    case report::TimePoint::Time: return "at " + t;
    }
    return t;
}

/// "3 blocks", "2 physical handles", or both.
std::string count_text(uint64_t blocks, uint64_t handles) {
    std::string out = blocks != 0 || handles == 0 ? plural(blocks, "block", "blocks") : "";
    if (handles != 0) out += (out.empty() ? "" : " and ") + plural(handles, "physical handle", "physical handles");
    return out;
}

void print_rest(const Shown& s) {
    uint64_t bytes = 0, blocks = 0, handles = 0;
    for (size_t i = s.sites.size(); i < s.table->sites.size(); ++i) {
        bytes += s.table->sites[i].bytes;
        (s.table->sites[i].physical ? handles : blocks) += s.table->sites[i].blocks;
    }
    size_t rest = s.table->sites.size() - s.sites.size();
    if (rest == 0) return;
    print("\n%s: %s (%s) in %s\n", plural(rest, "more site", "more sites").c_str(), human_bytes(bytes).c_str(),
          report::percent(bytes, s.table->total_bytes).c_str(), count_text(blocks, handles).c_str());
}

void print_sites(const report::Report& r, const Shown& s, const SiteSymbolizer& sym, bool tensors) {
    for (size_t i = 0; i < s.sites.size(); ++i) {
        const report::Site& site = *s.sites[i];
        std::string count = site.physical ? "physical, " + plural(site.blocks, "handle", "handles")
                                          : plural(site.blocks, "block", "blocks");
        if (tensors) count += ", requested " + human_bytes(site.requested);
        print("\n#%-3zu %10s %7s  %s  %s\n", i + 1, human_bytes(site.bytes).c_str(),
              report::percent(site.bytes, s.table->total_bytes).c_str(), count.c_str(),
              site_ids_text(site.stack_id, site.python_stack_id).c_str());
        print_site_frames(sym.get(s.frames[i]), r);
    }
    print_rest(s);
}

std::string pool_title(const report::Report& r, uint32_t capture_id) {
    if (capture_id == 0) return "Ordinary memory (owned by no capture)";
    std::string out = "Capture " + std::to_string(capture_id) + " pool";
    const report::Capture* c = r.find_capture(capture_id);
    if (c == nullptr) return out + " (no C record)";
    return out + " (stream " + hex(c->stream) + ", " + report::capture_mode_name(c->mode) + " mode, thread " +
           std::to_string(c->tid) + ")";
}

void print_pools(const report::Report& r, const TopView& v, const SiteSymbolizer& sym) {
    for (size_t p = 0; p < v.pools.size(); ++p) {
        const report::SiteTable& t = v.pools[p].table;
        print("\n== %s: %s (%s) in %s from %s\n", pool_title(r, v.pools[p].capture_id).c_str(),
              human_bytes(t.total_bytes).c_str(), report::percent(t.total_bytes, v.table.total_bytes).c_str(),
              count_text(t.total_blocks, t.total_handles).c_str(), plural(t.sites.size(), "site", "sites").c_str());
        print_sites(r, v.pool_shown[p], sym, v.tensors);
    }
}

void print_text(const report::Report& r, const Args& args, const TopView& v, const SiteSymbolizer& sym) {
    print("%s %s: ", what_text(r, args.kind, v.tensors).c_str(), when_text(args, v).c_str());
    if (v.table.total_blocks + v.table.total_handles == 0) {
        print("nothing live\n");
        return;
    }
    print("%s%s in %s from %s", human_bytes(v.table.total_bytes).c_str(),
          v.tensors ? (" (requested " + human_bytes(v.table.total_requested) + ")").c_str() : "",
          count_text(v.table.total_blocks, v.table.total_handles).c_str(),
          plural(v.table.sites.size(), "site", "sites").c_str());
    if (!args.pool) {
        print("\n");
        print_sites(r, v.all, sym, v.tensors);
        return;
    }
    print(", in %s\n", plural(v.pools.size(), "pool", "pools").c_str());
    print_pools(r, v, sym);
}

std::string share(uint64_t part, uint64_t total) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", total == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(total));
    return buf;
}

void json_sites(report::JsonWriter& j, const report::Report& r, const Shown& s, const SiteSymbolizer& sym,
                bool tensors) {
    j.key("sites").begin_array();
    for (size_t i = 0; i < s.sites.size(); ++i) {
        const report::Site& site = *s.sites[i];
        j.begin_object();
        j.key("stack_id").value(site.stack_id);
        j.key("python_stack_id").value(site.python_stack_id);
        j.key("kind").value(site.physical ? "physical" : "blocks");
        j.key("bytes").value(site.bytes);
        if (tensors) j.key("requested_bytes").value(site.requested);
        j.key("blocks").value(site.physical ? 0 : site.blocks);
        j.key("handles").value(site.physical ? site.blocks : 0);
        j.key("share").number(share(site.bytes, s.table->total_bytes));
        json_site_frames(j, sym.get(s.frames[i]), r);
        j.end_object();
    }
    j.end_array();
}

void json_pools(report::JsonWriter& j, const report::Report& r, const TopView& v, const SiteSymbolizer& sym) {
    j.key("pools").begin_array();
    for (size_t p = 0; p < v.pools.size(); ++p) {
        const report::Pool& pool = v.pools[p];
        j.begin_object();
        j.key("pool").value(pool.capture_id == 0 ? "ordinary" : "capture");
        j.key("capture_id");
        if (pool.capture_id == 0) {
            j.null();
        } else {
            j.value(pool.capture_id);
        }
        j.key("bytes").value(pool.table.total_bytes);
        j.key("blocks").value(pool.table.total_blocks);
        j.key("handles").value(pool.table.total_handles);
        j.key("share").number(share(pool.table.total_bytes, v.table.total_bytes));
        j.key("site_count").value(static_cast<uint64_t>(pool.table.sites.size()));
        json_sites(j, r, v.pool_shown[p], sym, v.tensors);
        j.end_object();
    }
    j.end_array();
}

const char* kind_filter_name(report::KindFilter k) {
    switch (k) {
    case report::KindFilter::Gpu: return "gpu";
    case report::KindFilter::Pinned: return "pinned";
    case report::KindFilter::Physical: return "physical";
    case report::KindFilter::All: return "all";
    }
    return "all";
}

void print_json(const report::Report& r, const Args& args, const TopView& v, const SiteSymbolizer& sym) {
    report::JsonWriter j;
    j.begin_object();
    j.key("file").value(r.path);
    j.key("complete").value(r.complete);
    j.key("at").value(args.at_name);
    j.key("time_s");
    if (v.has_peak) {
        j.number(report::seconds_exact(v.live.t));
    } else {
        j.null();
    }
    j.key("kind").value(kind_filter_name(args.kind));
    if (args.since) j.key("since_s").number(report::seconds_exact(*args.since));
    // Allocator mode only: which blocks the sites are of ("tensors": T records; "segments": A records).
    if (r.has_tensors()) j.key("view").value(v.tensors ? "tensors" : "segments");
    // What the bytes are of, in the words of diff, phases and merge: "tensors" or "gpu" (GPU kinds).
    if (args.kind == report::KindFilter::Gpu)
        j.key("bytes_of").value(report::series_name(v.tensors ? report::Series::Tensors : report::Series::Gpu));
    j.key("total_bytes").value(v.table.total_bytes);
    if (v.tensors) j.key("total_requested_bytes").value(v.table.total_requested);
    j.key("total_blocks").value(v.table.total_blocks);
    j.key("total_handles").value(v.table.total_handles);
    j.key("site_count").value(static_cast<uint64_t>(v.table.sites.size()));
    json_sites(j, r, v.all, sym, v.tensors);
    if (args.pool) json_pools(j, r, v, sym);
    j.end_object();
    std::cout << j.str();
}

/// The point of --by category in a whole report: its live set, whether there was a peak, and the
/// summary when --at peak.
void category_point_of(const report::Report& r, const Args& args, report::LiveSet& live, bool& has_peak,
                       std::optional<report::Summary>& summary) {
    if (args.at.type == report::TimePoint::Peak) summary = report::summarize(r);
    const report::Summary* known = summary ? &*summary : nullptr;
    has_peak = true;
    if (tensor_view(r, args) && summary && summary->tensor_peak_t) {
        live = report::tensors_live_at(r, args.at, &has_peak, known);
    } else {
        live = report::live_at(r, args.at, known);
        has_peak = !summary || summary->peak_t.has_value();
    }
}

/// The sites each category shows.
size_t category_sites(const Args& args) { return args.top_n_given ? args.top_n : 3; }

/// --by category: the breakdown of all GPU memory at the point; --at peak is, as for the sites, the
/// tensor peak in allocator mode (where the activations are), else the GPU peak. `categories`: the
/// breakdown of a streamed report's point (PointBreakdowns); else it is taken here, of the whole
/// report `r`.
int run_top_categories(const report::Report& r, const Args& args, const report::LiveSet& live, bool has_peak,
                       const std::optional<report::Summary>& summary, std::optional<report::Breakdown> categories) {
    CategoryView view = categories ? CategoryView(r, std::move(*categories), args.frames)
                                   : CategoryView(r, live.events_applied, category_sites(args), args.frames);
    std::cout.flush();
    const report::Breakdown& b = view.breakdown();
    if (args.json) {
        report::JsonWriter j;
        j.begin_object();
        j.key("file").value(r.path);
        j.key("complete").value(r.complete);
        j.key("at").value(args.at_name);
        j.key("time_s");
        if (has_peak) {
            j.number(report::seconds_exact(live.t));
        } else {
            j.null();
        }
        j.key("by").value("category");
        if (args.at.type == report::TimePoint::Peak) {
            j.key("peak").value(tensor_view(r, args) && summary->tensor_peak_t ? "tensors" : "gpu");
        }
        j.key("bytes_of").value(report::series_name(report::Series::Gpu));
        view.json(j, args.frames_given);
        j.end_object();
        std::cout << j.str();
        return kExitOk;
    }
    std::string when = "at exit (t=" + report::seconds_fixed3(live.t) + " s)";
    if (args.at.type == report::TimePoint::Peak) {
        const char* peak = tensor_view(r, args) && summary->tensor_peak_t ? "at the tensor peak" : "at peak";
        when = has_peak ? std::string(peak) + " (t=" + report::seconds_fixed3(live.t) + " s)"
                        : "at peak (GPU memory was never live)";
    } else if (args.at.type == report::TimePoint::Time) {
        when = "at t=" + report::seconds_fixed3(live.t) + " s";
    }
    print("Live GPU memory by category %s: ", when.c_str());
    if (b.parts.empty()) {
        print("nothing live\n");
        return kExitOk;
    }
    print("%s in %s", human_bytes(b.total).c_str(), plural(b.parts.size(), "category", "categories").c_str());
    if (view.estimated_bytes() != 0) print(", %s of it estimated", human_bytes(view.estimated_bytes()).c_str());
    print("; %s\n", view.moment_text().c_str());
    view.print_text(true, args.frames_given);
    return kExitOk;
}

/// The report of the point `args.at` from the streaming reader (report/stream.h): one pass (two
/// for a peak that kept coming back, report::PeakObserver); for --by category, its breakdown
/// (PointBreakdowns, with the tensor tags of the first pass). Nothing when only load_report answers
/// exactly: site labels that need backward_sites, and a pipe that could not be spooled.
std::optional<report::Report> stream_point(ReportInput& in, const Args& args, report::LiveSet& live, bool& has_peak,
                                           std::optional<report::Summary>& summary,
                                           std::optional<report::Breakdown>& categories) {
    report::TensorTagObserver tags;
    // The breakdown of the point of `r`, the report of the point: it keeps the stacks, steps and
    // moments of the whole one.
    auto breakdown = [&](const report::Report& r, size_t position, int64_t t) {
        if (!args.by_category) return;
        const std::unordered_map<size_t, report::Category> tag_map = tags.take();
        report::PointBreakdowns breakdowns(r, CategoryView::options(category_sites(args)), &tag_map);
        categories = breakdowns.at(r, live, position, t);
    };
    if (args.at.type != report::TimePoint::Peak) {
        std::optional<int64_t> after;
        if (args.at.type == report::TimePoint::Time) after = args.at.t;
        report::PointObserver point(std::nullopt, after, false);
        report::Observers both({&point, &tags});
        std::optional<report::Report> r = in.stream(both);
        // A time in a folded stretch: load_report reads the detail parts still there (and says
        // what is missing when they are gone).
        if (!r || r->backward_pending || point.before_fold()) return std::nullopt;
        has_peak = true;
        const int64_t t = args.at.type == report::TimePoint::Exit ? r->end_t : args.at.t;
        report::Report at = point.take(std::move(*r), t, live);
        breakdown(at, point.position(), point.last_t());
        return at;
    }
    report::SummaryBuilder builder;
    report::PeakObserver peaks;
    report::Observers all({&builder, &peaks, &tags});
    std::optional<report::Report> read = in.stream(all);
    if (!read || read->backward_pending) return std::nullopt;
    report::Report& r = *read;
    summary = builder.take(r);
    // As tensors_live_at and live_at choose it: the tensor peak for the tensor view (for --by
    // category, only when there was one), else the GPU peak.
    const bool tensors = args.by_category ? tensor_view(r, args) && summary->tensor_peak_t : tensor_view(r, args);
    has_peak = tensors ? summary->tensor_peak_t.has_value() : summary->peak_t.has_value();
    const size_t at = tensors ? summary->tensor_peak_events : summary->peak_events;
    const int64_t t = (tensors ? summary->tensor_peak_t : summary->peak_t).value_or(0);
    report::Report point_report;
    if (peaks.has(tensors, at)) {
        point_report = peaks.take(tensors, std::move(r), t, live);
    } else {
        report::PointObserver point(at, std::nullopt, true);  // the peak kept coming back: a second pass
        in.again(point);
        point_report = point.take(std::move(r), t, live);
    }
    // The time of the point's last event: the peak's (a peak is reached by an event); 0 for none.
    breakdown(point_report, at, t);
    return point_report;
}

}  // namespace

int run_top(const Args& args) {
    TopView v;
    std::optional<report::Summary> summary;
    std::optional<report::Breakdown> categories;
    ReportInput in(args.file);
    std::optional<report::Report> streamed = stream_point(in, args, v.live, v.has_peak, summary, categories);
    report::Report r = streamed ? std::move(*streamed) : in.load();
    print_warnings(r.warnings);
    if (args.by_category) {
        if (!streamed) category_point_of(r, args, v.live, v.has_peak, summary);
        return run_top_categories(r, args, v.live, v.has_peak, summary, std::move(categories));
    }
    SiteSymbolizer sym(r, args.frames);
    v.tensors = tensor_view(r, args);
    if (!streamed) live_of(r, args, v);
    build_view(r, args, sym, v);
    std::cout.flush();
    if (args.json) {
        print_json(r, args, v, sym);
    } else {
        print_text(r, args, v, sym);
    }
    return kExitOk;
}

}  // namespace memguard::cli

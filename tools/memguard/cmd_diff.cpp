// memguard diff A B [-n N] [--frames K] [--segments] [--fail-if EXPR]... [--json]: two runs side by
// side; --fail-if makes it a gate (diff_gates.h). Phases are
// matched by name and occurrence (the k-th phase named X in A with the k-th in B); sites live at the
// peak are matched by their symbolized frames (site_key), so the same code matches across runs even
// when the stack ids differ. When both runs used memguard's allocator (T records), the sites are
// those of the tensor blocks at the tensor peak, as `top` shows them (--segments: the segments).
// Each run is read once by the streaming reader (report/stream.h: the summary, the live sets at both
// peaks and the phases of both series in one pass; a peak that kept coming back, a second pass),
// or by load_report where that cannot answer exactly: site labels that need backward_sites
// (Report::backward_pending), and a pipe that could not be spooled (report_input.h).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "cli.h"
#include "diff_gates.h"
#include "output.h"
#include "report/collections.h"
#include "report/json.h"
#include "report/saturate.h"
#include "report/stream.h"
#include "report/stream_phases.h"
#include "report/timeline.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

/// The figures diff compares are uint64 (bytes, counts) or int64 (CUDA bytes freed by collections,
/// which a report may give as any int64): held in 128 bits, each of them and B - A are exact. In
/// 64 bits a peak beyond INT64_MAX showed as negative and B - A overflowed (undefined behaviour;
/// INT64_MAX and -INT64_MAX printed a delta of +2 B).
using Wide = report::GateInt;
using report::gate_int_text;
std::string wide_text(Wide v) { return gate_int_text(v); }
std::string wide_bytes(Wide v) { return report::gate_bytes_text(v); }

/// One report and what diff derives from it.
struct Side {
    report::Report r;
    report::Summary summary;
    std::vector<report::PhaseStats> phases;
    // site key -> (bytes at peak, stopping at UINT64_MAX; label)
    std::map<std::string, std::pair<uint64_t, std::string>> sites;
    // A streamed run (r.streamed): what its pass kept until both runs say which series diff compares.
    std::unique_ptr<report::PeakObserver> peaks;
    std::unique_ptr<report::PhaseObserver> phase_figures;
    std::unique_ptr<ReportInput> input;  // for a second pass (a pipe's spool)
};

Side load_side(const std::string& path) {
    Side s;
    s.input = std::make_unique<ReportInput>(path);
    report::SummaryBuilder builder;
    auto peaks = std::make_unique<report::PeakObserver>();
    auto phases = std::make_unique<report::PhaseObserver>();
    report::Observers all({&builder, peaks.get(), phases.get()});
    std::optional<report::Report> r = s.input->stream(all);
    if (r && !r->backward_pending) {
        s.summary = builder.take(*r);
        s.r = std::move(*r);
        s.peaks = std::move(peaks);
        s.phase_figures = std::move(phases);
        print_warnings(s.r.warnings);
        return s;
    }
    s.r = s.input->load();
    print_warnings(s.r.warnings);
    s.summary = report::summarize(s.r);
    return s;
}

/// The sites live at the peak of a streamed run: its report becomes the report of that point.
report::SiteTable streamed_sites_at_peak(Side& s, bool tensors) {
    const size_t at = tensors ? s.summary.tensor_peak_events : s.summary.peak_events;
    const int64_t t = (tensors ? s.summary.tensor_peak_t : s.summary.peak_t).value_or(0);
    report::LiveSet live;
    if (s.peaks->has(tensors, at)) {
        s.r = s.peaks->take(tensors, std::move(s.r), t, live);
    } else {
        report::PointObserver point(at, std::nullopt, true);  // the peak kept coming back: a second pass
        s.input->again(point);
        s.r = point.take(std::move(s.r), t, live);
    }
    s.peaks.reset();
    return tensors ? report::group_tensors_by_site(s.r, live)
                   : report::group_by_site(s.r, live, report::KindFilter::Gpu);
}

/// The side's phases and its sites at its peak: of the tensor blocks (tensor bytes, the tensor
/// peak), or of the GPU blocks (in allocator mode, the segments; the GPU peak).
void find_phases_and_sites(Side& s, bool tensors, size_t frames) {
    const report::Series series = tensors ? report::Series::Tensors : report::Series::Gpu;
    report::SiteTable table;
    if (s.r.streamed) {
        s.phases = s.phase_figures->stats(series);
        s.phase_figures.reset();
        table = streamed_sites_at_peak(s, tensors);
    } else {
        s.phases = report::phase_stats(s.r, report::build_timeline(s.r), series);
        table = site_table_at_peak(s.r, tensors, &s.summary);
    }
    SiteSymbolizer sym(s.r, frames);
    std::vector<size_t> handles;
    for (const report::Site& site : table.sites) handles.push_back(sym.add(site.stack_id, site.python_stack_id));
    sym.resolve();
    for (size_t i = 0; i < table.sites.size(); ++i) {
        const SiteFrames& f = sym.get(handles[i]);
        auto& entry = s.sites[site_key(f, s.r)];
        report::add_to(entry.first, table.sites[i].bytes);
        if (entry.second.empty()) entry.second = site_label(f, s.r);
    }
}

/// A row of figures: the value in A and in B (either may be absent).
struct Row {
    std::string label;
    std::optional<Wide> a, b;
    bool bytes = true;
};

std::string value_text(const std::optional<Wide>& v, bool bytes) {
    if (!v) return "-";
    return bytes ? wide_bytes(*v) : wide_text(*v);
}

std::string delta_text(const Row& row) {
    if (!row.a || !row.b) return "-";
    Wide d = *row.b - *row.a;
    std::string s = value_text(d, row.bytes);
    return d > 0 ? "+" + s : s;
}

/// B/A with `decimals` decimals, "-" when A is 0 or a side is absent.
std::string ratio_text(const Row& row, int decimals = 3) {
    if (!row.a || !row.b || *row.a == 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, static_cast<double>(*row.b) / static_cast<double>(*row.a));
    return buf;
}

void print_row(const std::string& first, const Row& row) {
    print("  %-28s %-20s %11s %11s %12s %7s\n", first.c_str(), row.label.c_str(), value_text(row.a, row.bytes).c_str(),
          value_text(row.b, row.bytes).c_str(), delta_text(row).c_str(), ratio_text(row).c_str());
}

Wide freed_by(const report::Summary& s, report::GcTrigger t) { return s.cuda_bytes_freed[report::trigger_index(t)]; }

std::vector<Row> total_rows(const Side& a, const Side& b) {
    auto i = [](uint64_t v) { return std::optional<Wide>(v); };
    // A run without memguard's allocator has no tensor figures ("-").
    auto tensor = [&i](const Side& s, uint64_t report::Summary::*f) {
        return s.r.has_tensors() ? i(s.summary.*f) : std::nullopt;
    };
    std::vector<Row> rows;
    rows.push_back({"peak", i(a.summary.peak_bytes), i(b.summary.peak_bytes)});
    rows.push_back({"live at exit", i(a.summary.live_bytes_at_exit), i(b.summary.live_bytes_at_exit)});
    if (a.r.has_tensors() || b.r.has_tensors()) {
        rows.push_back({"tensor peak", tensor(a, &report::Summary::tensor_peak_bytes),
                        tensor(b, &report::Summary::tensor_peak_bytes)});
        rows.push_back({"tensors live at exit", tensor(a, &report::Summary::tensor_live_bytes_at_exit),
                        tensor(b, &report::Summary::tensor_live_bytes_at_exit)});
        Row ooms{"allocator OOM events", tensor(a, &report::Summary::tensor_oom_events),
                 tensor(b, &report::Summary::tensor_oom_events)};
        ooms.bytes = false;
        rows.push_back(ooms);
    }
    rows.push_back({"OOM events", i(a.summary.oom_events), i(b.summary.oom_events), false});
    rows.push_back({"failed allocations", i(a.summary.failed_allocations), i(b.summary.failed_allocations), false});
    for (report::GcTrigger t : {report::GcTrigger::Memguard, report::GcTrigger::Recompute, report::GcTrigger::Step,
                                report::GcTrigger::Explicit, report::GcTrigger::Automatic}) {
        // Minor 9's triggers only when either run has collections of them (older diffs stay as they were).
        const size_t k = report::trigger_index(t);
        if ((t == report::GcTrigger::Recompute || t == report::GcTrigger::Step) && a.summary.collections[k] == 0 &&
            b.summary.collections[k] == 0) {
            continue;
        }
        rows.push_back({std::string("freed by gc (") + report::trigger_name(t) + ")", freed_by(a.summary, t),
                        freed_by(b.summary, t)});
    }
    rows.push_back({"collections", i(a.r.collections.size()), i(b.r.collections.size()), false});
    rows.push_back({"compiles", i(a.summary.compiles), i(b.summary.compiles), false});
    rows.push_back({"phases", i(a.r.phases.size()), i(b.r.phases.size()), false});
    return rows;
}

/// A phase of A and/or B with the same name and occurrence.
struct PhasePair {
    std::string name;
    uint32_t occurrence = 0;
    const report::PhaseStats* a = nullptr;
    const report::PhaseStats* b = nullptr;
};

std::vector<PhasePair> match_phases(const Side& a, const Side& b) {
    std::vector<PhasePair> out;
    std::map<std::pair<std::string, uint32_t>, size_t> index;
    for (const report::PhaseStats& s : a.phases) {
        const std::string& name = a.r.phases[s.index].name;
        index[{name, s.occurrence}] = out.size();
        out.push_back({name, s.occurrence, &s, nullptr});
    }
    for (const report::PhaseStats& s : b.phases) {
        const std::string& name = b.r.phases[s.index].name;
        auto it = index.find({name, s.occurrence});
        if (it != index.end()) {
            out[it->second].b = &s;
        } else {
            out.push_back({name, s.occurrence, nullptr, &s});
        }
    }
    return out;
}

std::vector<Row> phase_rows(const PhasePair& p) {
    auto get = [](const report::PhaseStats* s, uint64_t report::PhaseStats::*f) {
        return s ? std::optional<Wide>(s->*f) : std::nullopt;
    };
    auto incr = [](const report::PhaseStats* s) {
        return s ? std::optional<Wide>(s->incremental_peak()) : std::nullopt;
    };
    return {{"peak", get(p.a, &report::PhaseStats::peak_bytes), get(p.b, &report::PhaseStats::peak_bytes)},
            {"incremental peak", incr(p.a), incr(p.b)},
            {"entry", get(p.a, &report::PhaseStats::entry_bytes), get(p.b, &report::PhaseStats::entry_bytes)},
            {"exit", get(p.a, &report::PhaseStats::exit_bytes), get(p.b, &report::PhaseStats::exit_bytes)}};
}

std::string phase_title(const PhasePair& p) {
    std::string t = p.name;
    if (p.occurrence != 0) t += " #" + std::to_string(p.occurrence + 1);
    if (!p.a) t += " (B only)";
    if (!p.b) t += " (A only)";
    return t;
}

struct SiteDelta {
    std::string key, label;
    uint64_t a = 0, b = 0;
    Wide delta() const { return static_cast<Wide>(b) - static_cast<Wide>(a); }
};

/// Sites at the peak whose bytes changed: grown ones (largest growth first), then shrunk ones.
std::pair<std::vector<SiteDelta>, std::vector<SiteDelta>> site_changes(const Side& a, const Side& b) {
    std::map<std::string, SiteDelta> all;
    for (const auto& [key, v] : a.sites) all[key] = SiteDelta{key, v.second, v.first, 0};
    for (const auto& [key, v] : b.sites) {
        SiteDelta& d = all[key];
        d.key = key;
        if (d.label.empty()) d.label = v.second;
        d.b = v.first;
    }
    std::vector<SiteDelta> grew, shrank;
    for (const auto& [key, d] : all) {
        if (d.delta() > 0) grew.push_back(d);
        if (d.delta() < 0) shrank.push_back(d);
    }
    auto by_size = [](const SiteDelta& x, const SiteDelta& y) {
        Wide dx = x.delta() < 0 ? -x.delta() : x.delta(), dy = y.delta() < 0 ? -y.delta() : y.delta();
        return dx != dy ? dx > dy : x.key < y.key;
    };
    std::sort(grew.begin(), grew.end(), by_size);
    std::sort(shrank.begin(), shrank.end(), by_size);
    return {grew, shrank};
}

void print_sites(const char* title, const std::vector<SiteDelta>& sites, size_t n, bool tensors) {
    print("\n%s that %s: %zu\n", tensors ? "Tensor sites at the tensor peak" : "Sites at the peak", title,
          sites.size());
    for (size_t i = 0; i < sites.size() && i < n; ++i) {
        const SiteDelta& d = sites[i];
        Row row{"", Wide{d.a}, Wide{d.b}};
        print("  %12s  %11s -> %11s  %s\n", delta_text(row).c_str(), human_bytes(d.a).c_str(), human_bytes(d.b).c_str(),
              d.label.c_str());
    }
}

void print_text(const Side& a, const Side& b, const Args& args, bool tensors) {
    print("A: %s\nB: %s\n\n", a.r.path.c_str(), b.r.path.c_str());
    if (a.r.has_tensors() != b.r.has_tensors()) {
        const char* which = a.r.has_tensors() ? "A" : "B";
        print("Only %s used memguard's allocator: the sites compared are GPU blocks (%s's are its "
              "allocator's segments).\n\n",
              which, which);
    }
    print("  %-49s %11s %11s %12s %7s\n", "", "A", "B", "delta", "B/A");
    for (Row row : total_rows(a, b)) {
        std::string label = row.label;
        row.label.clear();
        print_row(label, row);
    }
    std::vector<PhasePair> phases = match_phases(a, b);
    if (!phases.empty()) {
        print("\nPhases (matched by name and occurrence%s):\n", tensors ? "; tensor bytes" : "");
        for (const PhasePair& p : phases) {
            bool first = true;
            for (const Row& row : phase_rows(p)) {
                print_row(first ? phase_title(p) : "", row);
                first = false;
            }
        }
    }
    auto [grew, shrank] = site_changes(a, b);
    print_sites("grew", grew, args.top_n, tensors);
    print_sites("shrank", shrank, args.top_n, tensors);
}

/// `v` as a JSON integer (exact, even beyond 64 bits), or null.
void json_wide(report::JsonWriter& j, const std::optional<Wide>& v) {
    if (v) {
        j.number(wide_text(*v));
    } else {
        j.null();
    }
}

void json_row(report::JsonWriter& j, const Row& row) {
    j.key("a");
    json_wide(j, row.a);
    j.key("b");
    json_wide(j, row.b);
    j.key("delta");
    json_wide(j, row.a && row.b ? std::optional<Wide>(*row.b - *row.a) : std::nullopt);
    j.key("ratio");
    std::string ratio = ratio_text(row, 6);
    if (ratio == "-") {
        j.null();
    } else {
        j.number(ratio);
    }
}

std::string json_key(std::string label) {
    for (char& c : label) c = (c == ' ' || c == '(' || c == ')') ? '_' : c;
    while (!label.empty() && label.back() == '_') label.pop_back();
    std::string out;
    for (char c : label) {
        if (c == '_' && !out.empty() && out.back() == '_') continue;
        out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    }
    return out;
}

void json_sites(report::JsonWriter& j, const char* key, const std::vector<SiteDelta>& sites, size_t n) {
    j.key(key).begin_array();
    for (size_t i = 0; i < sites.size() && i < n; ++i) {
        j.begin_object();
        j.key("site").value(sites[i].label);
        j.key("key").value(sites[i].key);
        json_row(j, Row{"", Wide{sites[i].a}, Wide{sites[i].b}});
        j.end_object();
    }
    j.end_array();
}

void print_json(const Side& a, const Side& b, const Args& args, bool tensors, const std::vector<GateResult>& gates) {
    report::JsonWriter j;
    j.begin_object();
    j.key("a").value(a.r.path);
    j.key("b").value(b.r.path);
    // What the bytes of the phases and sites are of: "tensors" (both runs in allocator mode), else "gpu".
    j.key("bytes_of").value(report::series_name(tensors ? report::Series::Tensors : report::Series::Gpu));
    j.key("totals").begin_object();
    for (const Row& row : total_rows(a, b)) {
        j.key(json_key(row.label)).begin_object();
        json_row(j, row);
        j.end_object();
    }
    j.end_object();
    j.key("phases").begin_array();
    for (const PhasePair& p : match_phases(a, b)) {
        j.begin_object();
        j.key("name").value(p.name);
        j.key("occurrence").value(p.occurrence);
        j.key("in_a").value(p.a != nullptr);
        j.key("in_b").value(p.b != nullptr);
        for (const Row& row : phase_rows(p)) {
            j.key(json_key(row.label) + "_bytes").begin_object();
            json_row(j, row);
            j.end_object();
        }
        j.end_object();
    }
    j.end_array();
    auto [grew, shrank] = site_changes(a, b);
    json_sites(j, "sites_grew", grew, args.top_n);
    json_sites(j, "sites_shrank", shrank, args.top_n);
    if (!args.fail_if.empty()) json_gates(j, gates);
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_diff(const Args& args) {
    Side a = load_side(args.files[0]);
    Side b = load_side(args.files[1]);
    // The tensor blocks when both runs used memguard's allocator.
    const bool tensors = tensor_view(a.r, args) && tensor_view(b.r, args);
    find_phases_and_sites(a, tensors, args.frames);
    find_phases_and_sites(b, tensors, args.frames);
    // Before any output: a gate that cannot be measured is an error, not a diff and then an error.
    const std::vector<GateResult> gates = evaluate_gates(args.fail_if, {a.r, a.summary, a.phases},
                                                         {b.r, b.summary, b.phases});
    std::cout.flush();
    if (args.json) {
        print_json(a, b, args, tensors, gates);
    } else {
        print_text(a, b, args, tensors);
        if (!gates.empty()) print_gates(gates);
    }
    for (const GateResult& g : gates) {
        if (g.failed) return kExitGateFailed;
    }
    return kExitOk;
}

}  // namespace memguard::cli

// memguard steps FILE [--segments] [--json]: one row per training step (s records, format 1.8) with
// its duration, peak, incremental peak, live bytes at its end and the largest categories at its
// peak; then the growth finding (docs/steps.md). In allocator mode the bytes are the tensor blocks'
// (torch.cuda.memory_allocated()), as `phases` counts them; --segments: the segments.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>

#include "cli.h"
#include "output.h"
#include "report/categories.h"
#include "report/json.h"
#include "report/oom.h"
#include "report/steps.h"
#include "report/timeline.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

/// Categories shown per step, and sites and categories shown for a growth.
constexpr size_t kStepCategories = 3;
constexpr size_t kGrowthSites = 5;

struct StepsView {
    report::Series series = report::Series::Gpu;
    std::vector<report::StepRow> rows;
    std::vector<report::Breakdown> at_peak;  // per row
    std::optional<report::Growth> growth;
    size_t warmup = 0;
    std::vector<report::SiteChange> sites;
    std::vector<std::string> site_labels;
    std::vector<report::CategoryChange> categories;
};

/// In the tensor view (allocator mode), the parts of a breakdown that can be tensor blocks: the
/// allocator's cache and the memory of NCCL, other libraries and the rest are outside the bytes
/// the rows count, so they are left out there.
void keep_tensor_parts(report::Breakdown& b) {
    auto outside = [](const report::CategoryPart& p) {
        return p.category == report::Category::AllocatorCache || p.category == report::Category::Nccl ||
               p.category == report::Category::Library || p.category == report::Category::Other;
    };
    b.parts.erase(std::remove_if(b.parts.begin(), b.parts.end(), outside), b.parts.end());
}

StepsView analyse(const report::Report& r, const Args& args) {
    StepsView v;
    v.series = tensor_view(r, args) ? report::Series::Tensors : report::Series::Gpu;
    report::Timeline tl = report::build_timeline(r);
    v.rows = report::step_rows(r, tl, v.series);
    std::vector<uint64_t> ends;
    for (const report::StepRow& row : v.rows) ends.push_back(row.exit_bytes);
    const report::GrowthRule rule;
    v.warmup = report::warmup_steps(ends.size(), rule);
    v.growth = report::find_growth(ends, rule);

    // Every step's peak, and the two ends of a growth, in one replay of the report.
    std::vector<size_t> points;
    points.reserve(v.rows.size() + 2);
    for (const report::StepRow& row : v.rows) points.push_back(row.peak_events);
    if (v.growth) {
        points.push_back(v.rows[v.growth->first].events_end);
        points.push_back(v.rows[v.growth->last].events_end);
    }
    report::BreakdownOptions options;
    options.max_sites = 0;
    options.symbolizer = symbolizer_options();  // the same rules as `top --by category`
    v.at_peak = report::breakdowns_at(r, points, options);
    if (v.series == report::Series::Tensors) {
        for (report::Breakdown& b : v.at_peak) keep_tensor_parts(b);
    }
    if (!v.growth) return v;
    const report::Breakdown at_to = std::move(v.at_peak.back());
    v.at_peak.pop_back();
    const report::Breakdown at_from = std::move(v.at_peak.back());
    v.at_peak.pop_back();
    v.categories = report::grown_categories(at_from, at_to);
    const size_t from = at_from.events_applied, to = at_to.events_applied;
    const bool tensors = v.series == report::Series::Tensors;
    auto table = [&](size_t at) {
        report::LiveSet live = report::live_after(r, at);
        return tensors ? report::group_tensors_by_site(r, live)
                       : report::group_by_site(r, live, report::KindFilter::Gpu);
    };
    v.sites = report::grown_sites(table(from), table(to), kGrowthSites);
    SiteSymbolizer sym(r, args.frames);
    std::vector<size_t> handles;
    for (const report::SiteChange& s : v.sites) handles.push_back(sym.add(s.stack_id, s.python_stack_id));
    sym.resolve();
    for (size_t h : handles) v.site_labels.push_back(site_label(sym.get(h), r));
    return v;
}

std::string categories_text(const report::Breakdown& b) {
    std::string s;
    for (size_t i = 0; i < b.parts.size() && i < kStepCategories; ++i) {
        const report::CategoryPart& p = b.parts[i];
        if (!s.empty()) s += ", ";
        s += report::part_label(p) + " " + human_bytes(p.bytes);
    }
    return s.empty() ? "-" : s;
}

uint32_t step_number(const report::Report& r, const StepsView& v, size_t row) {
    return r.steps[v.rows[row].index].index;
}

std::string per_step_text(double per_step) {
    return human_bytes(static_cast<uint64_t>(std::min(std::floor(per_step), 18446744073709549568.0)));
}

void print_steps(const report::Report& r, const StepsView& v) {
    print("Steps in %s: %s%s\n", r.path.c_str(), plural(r.steps.size(), "step", "steps").c_str(),
          format_note(r, 8).c_str());
    if (r.steps.empty()) {
        print("Steps are recorded when an optimizer's step() returns (torch.optim, found with no code change), or\n"
              "at each memguard.step() call: call it once per step in a training loop without an optimizer.\n");
        return;
    }
    if (!r.tensors.empty()) {
        print("%s\n", v.series == report::Series::Tensors
                          ? "Bytes: tensor blocks of memguard's allocator (torch.cuda.memory_allocated(); "
                            "--segments: its segments)"
                          : "Bytes: the segments of memguard's allocator (torch.cuda.memory_reserved())");
    }
    print("\n%6s %9s %10s %10s %11s %11s  %s\n", "step", "end s", "duration s", "peak", "incr. peak", "live at end",
          "categories at peak");
    for (size_t i = 0; i < v.rows.size(); ++i) {
        const report::StepRow& row = v.rows[i];
        print("%6u %9s %10s %10s %11s %11s  %s\n", step_number(r, v, i), report::seconds_fixed3(row.t_end).c_str(),
              report::seconds_fixed3(row.t_end - row.t_begin).c_str(), human_bytes(row.peak_bytes).c_str(),
              human_bytes(row.incremental_peak()).c_str(), human_bytes(row.exit_bytes).c_str(),
              categories_text(v.at_peak[i]).c_str());
    }
    if (!v.growth) {
        print("\nNo growth: live bytes at step end did not grow over 3 or more consecutive steps%s.\n",
              v.warmup == 0 ? "" : (" after the first " + plural(v.warmup, "step", "steps")).c_str());
        return;
    }
    const report::Growth& g = *v.growth;
    const uint32_t first = step_number(r, v, g.first), last = step_number(r, v, g.last);
    print("\nGrowth: live bytes at step end grew by %s a step over steps %u to %u (%s to %s, +%s)\n",
          per_step_text(g.per_step).c_str(), first, last, human_bytes(g.from_bytes).c_str(),
          human_bytes(g.to_bytes).c_str(), human_bytes(g.to_bytes - g.from_bytes).c_str());
    if (!v.sites.empty()) print("  Sites that grew from the end of step %u to the end of step %u:\n", first, last);
    for (size_t i = 0; i < v.sites.size(); ++i) {
        const report::SiteChange& s = v.sites[i];
        print("    +%-11s %s  %s\n", human_bytes(s.to - s.from).c_str(), v.site_labels[i].c_str(),
              site_ids_text(s.stack_id, s.python_stack_id).c_str());
    }
    if (!v.categories.empty()) print("  Categories that grew:\n");
    for (const report::CategoryChange& c : v.categories) {
        report::CategoryPart named;
        named.category = c.category;
        named.detail = c.detail;
        print("    +%-11s %s\n", human_bytes(c.to - c.from).c_str(), report::part_name(named).c_str());
    }
}

/// Every category of the breakdown (the text shows the largest kStepCategories).
void json_categories(report::JsonWriter& j, const report::Breakdown& b) {
    j.begin_array();
    for (size_t i = 0; i < b.parts.size(); ++i) {
        const report::CategoryPart& p = b.parts[i];
        j.begin_object();
        j.key("category").value(format::name_of(p.category));
        j.key("detail").value(p.detail);
        j.key("bytes").value(p.bytes);
        j.key("estimate").value(p.estimate);
        j.end_object();
    }
    j.end_array();
}

void json_steps(const report::Report& r, const StepsView& v) {
    report::JsonWriter j;
    j.begin_object();
    j.key("bytes_of").value(report::series_name(v.series));
    j.key("steps").begin_array();
    for (size_t i = 0; i < v.rows.size(); ++i) {
        const report::StepRow& row = v.rows[i];
        const report::Step& s = r.steps[row.index];
        j.begin_object();
        j.key("step").value(s.index);
        j.key("source").value(format::name_of(s.source));
        j.key("name").value(s.name);
        j.key("thread").value(s.tid);
        j.key("begin_t").number(report::seconds_exact(row.t_begin));
        j.key("end_t").number(report::seconds_exact(row.t_end));
        j.key("duration_s").number(report::seconds_exact(row.t_end - row.t_begin));
        j.key("entry_bytes").value(row.entry_bytes);
        j.key("peak_bytes").value(row.peak_bytes);
        j.key("incremental_peak_bytes").value(row.incremental_peak());
        j.key("peak_t").number(report::seconds_exact(row.peak_t));
        j.key("live_at_end_bytes").value(row.exit_bytes);
        j.key("categories_at_peak");
        json_categories(j, v.at_peak[i]);
        j.end_object();
    }
    j.end_array();
    j.key("warmup_steps").value(static_cast<uint64_t>(v.warmup));
    j.key("growth");
    if (!v.growth) {
        j.null();
    } else {
        const report::Growth& g = *v.growth;
        j.begin_object();
        j.key("first_step").value(step_number(r, v, g.first));
        j.key("last_step").value(step_number(r, v, g.last));
        j.key("steps").value(static_cast<uint64_t>(g.last - g.first + 1));
        j.key("from_bytes").value(g.from_bytes);
        j.key("to_bytes").value(g.to_bytes);
        j.key("per_step_bytes").value(static_cast<uint64_t>(std::min(std::floor(g.per_step), 18446744073709549568.0)));
        j.key("sites").begin_array();
        for (size_t i = 0; i < v.sites.size(); ++i) {
            const report::SiteChange& s = v.sites[i];
            j.begin_object();
            j.key("label").value(v.site_labels[i]);
            j.key("stack_id").value(s.stack_id);
            j.key("python_stack_id").value(s.python_stack_id);
            j.key("from_bytes").value(s.from);
            j.key("to_bytes").value(s.to);
            j.end_object();
        }
        j.end_array();
        j.key("categories").begin_array();
        for (const report::CategoryChange& c : v.categories) {
            j.begin_object();
            j.key("category").value(format::name_of(c.category));
            j.key("detail").value(c.detail);
            j.key("from_bytes").value(c.from);
            j.key("to_bytes").value(c.to);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_steps(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    StepsView v = analyse(r, args);
    std::cout.flush();
    if (args.json) {
        json_steps(r, v);
    } else {
        print_steps(r, v);
    }
    return kExitOk;
}

}  // namespace memguard::cli

// memguard steps FILE [--segments] [--json]: one row per training step (s records, format 1.8) with
// its duration, peak, incremental peak, live bytes at its end and the largest categories at its
// peak (and the CUDA bytes collections freed, when any did); then the growth finding and what became
// of the growth: freed by later collections (garbage cycles) or still held (docs/steps.md). In
// allocator mode the bytes are the tensor blocks' (torch.cuda.memory_allocated()), as `phases`
// counts them; --segments: the segments.
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
#include "report/stream.h"
#include "report/stream_steps.h"
#include "report/timeline.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

/// Categories shown per step, and sites and categories shown for a growth.
constexpr size_t kStepCategories = 3;
constexpr size_t kGrowthSites = 5;
/// Collections listed for a growth (the rest are counted).
constexpr size_t kGrowthCollections = 5;

struct StepsView {
    report::Series series = report::Series::Gpu;
    std::vector<report::StepRow> rows;
    std::vector<report::Breakdown> at_peak;  // per row
    std::optional<report::Growth> growth;
    size_t warmup = 0;
    std::vector<report::SiteChange> sites;
    std::vector<std::string> site_labels;
    std::vector<report::CategoryChange> categories;
    std::vector<report::StepCollections> collections;  // per row
    bool gc_column = false;                            // some step's collections freed CUDA memory
    report::GrowthFate fate;
    std::vector<std::string> collected_labels, held_labels;  // per fate site
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

/// The rows' figures: the growth finding and the collections per step.
void finish_rows(const report::Report& r, StepsView& v) {
    std::vector<uint64_t> ends;
    for (const report::StepRow& row : v.rows) ends.push_back(row.exit_bytes);
    const report::GrowthRule rule;
    v.warmup = report::warmup_steps(ends.size(), rule);
    v.growth = report::find_growth(ends, rule);
    v.collections = report::step_collections(r, v.rows);
    for (const report::StepCollections& c : v.collections) v.gc_column = v.gc_column || c.freed_bytes != 0;
}

/// Every step's peak, then the two ends of a growth: the points whose categories `steps` shows.
std::vector<size_t> category_points(const StepsView& v) {
    std::vector<size_t> points;
    points.reserve(v.rows.size() + 2);
    for (const report::StepRow& row : v.rows) points.push_back(row.peak_events);
    if (v.growth) {
        points.push_back(v.rows[v.growth->first].events_end);
        points.push_back(v.rows[v.growth->last].events_end);
    }
    return points;
}

report::BreakdownOptions breakdown_options() {
    report::BreakdownOptions options;
    options.max_sites = 0;
    options.symbolizer = symbolizer_options();  // the same rules as `top --by category`
    return options;
}

/// The rest, from the breakdowns at category_points(v), the site tables at the growth's ends and
/// what became of it: the categories and sites that grew, with their labels.
void finish(const report::Report& r, const Args& args, StepsView& v, std::vector<report::Breakdown> at_points,
            const report::SiteTable& from_table, const report::SiteTable& to_table, report::GrowthFate fate) {
    v.at_peak = std::move(at_points);
    if (v.series == report::Series::Tensors) {
        for (report::Breakdown& b : v.at_peak) keep_tensor_parts(b);
    }
    if (!v.growth) return;
    const report::Breakdown at_to = std::move(v.at_peak.back());
    v.at_peak.pop_back();
    const report::Breakdown at_from = std::move(v.at_peak.back());
    v.at_peak.pop_back();
    v.categories = report::grown_categories(at_from, at_to);
    v.sites = report::grown_sites(from_table, to_table, kGrowthSites);
    v.fate = std::move(fate);
    SiteSymbolizer sym(r, args.frames);
    std::vector<size_t> handles, collected, held;
    for (const report::SiteChange& s : v.sites) handles.push_back(sym.add(s.stack_id, s.python_stack_id));
    for (const report::GrowthSite& s : v.fate.collected_sites)
        collected.push_back(sym.add(s.stack_id, s.python_stack_id));
    for (const report::GrowthSite& s : v.fate.held_sites) held.push_back(sym.add(s.stack_id, s.python_stack_id));
    sym.resolve();
    for (size_t h : handles) v.site_labels.push_back(site_label(sym.get(h), r));
    for (size_t h : collected) v.collected_labels.push_back(site_label(sym.get(h), r));
    for (size_t h : held) v.held_labels.push_back(site_label(sym.get(h), r));
}

/// `steps` of a report read whole (load_report).
StepsView analyse(const report::Report& r, const Args& args) {
    StepsView v;
    v.series = tensor_view(r, args) ? report::Series::Tensors : report::Series::Gpu;
    v.rows = report::step_rows(r, report::build_timeline(r), v.series);
    finish_rows(r, v);
    // Every step's peak, and the two ends of a growth, in one replay of the report.
    std::vector<report::Breakdown> at_points = report::breakdowns_at(r, category_points(v), breakdown_options());
    report::SiteTable from_table, to_table;
    report::GrowthFate fate;
    if (v.growth) {
        const bool tensors = v.series == report::Series::Tensors;
        auto table = [&](size_t at) {
            report::LiveSet live = report::live_after(r, at);
            return tensors ? report::group_tensors_by_site(r, live)
                           : report::group_by_site(r, live, report::KindFilter::Gpu);
        };
        from_table = table(v.rows[v.growth->first].events_end);
        to_table = table(v.rows[v.growth->last].events_end);
        fate = report::growth_fate(r, v.rows, *v.growth, v.series, kGrowthSites);
    }
    finish(r, args, v, std::move(at_points), from_table, to_table, std::move(fate));
    return v;
}

/// `steps` through the streaming reader (report/stream_steps.h): the rows and the tensor tags in one
/// pass, the categories, site tables and growth items in a second, stopped after the last point when
/// there is no growth (a pipe: its spool, report_input.h). Nothing where load_report must answer: a
/// report whose site labels need backward_sites (backward_pending), a pipe that could not be spooled.
std::optional<StepsView> analyse_streamed(ReportInput& in, const Args& args, std::optional<report::Report>& out) {
    report::StepRowsObserver rows;
    report::TensorTagObserver tags;
    report::Observers first({&rows, &tags});
    std::optional<report::Report> read = in.stream(first);
    if (!read || read->backward_pending) return std::nullopt;
    report::Report& r = *read;
    StepsView v;
    v.series = tensor_view(r, args) ? report::Series::Tensors : report::Series::Gpu;
    v.rows = rows.rows(v.series);
    finish_rows(r, v);
    if (v.rows.empty()) {
        out = std::move(r);
        return v;
    }
    const std::vector<size_t> points = category_points(v);
    const std::unordered_map<size_t, report::Category> tag_map = tags.take();
    const report::BreakdownOptions options = breakdown_options();
    report::PointBreakdowns breakdowns(r, options, &tag_map);
    report::StepPointsObserver second(report::plan_points(r, v.rows, v.growth, v.series, points), breakdowns);
    in.again(second);
    std::vector<report::Breakdown> at_points;
    at_points.reserve(points.size());
    for (size_t p : points) at_points.push_back(second.at(p));
    report::GrowthFate fate;
    if (v.growth && second.growth_folded()) {
        fate.exact = v.series == report::Series::Tensors;
        fate.folded = true;
    } else if (v.growth) {
        fate = report::growth_fate(r, v.rows, *v.growth, v.series, kGrowthSites, second.take_items());
    }
    finish(r, args, v, std::move(at_points), second.from_table(), second.to_table(), std::move(fate));
    out = std::move(r);
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

/// A column of the step table: a space, then `text` right-aligned in 10 characters.
std::string column(const std::string& text) {
    return " " + (text.size() < 10 ? std::string(10 - text.size(), ' ') : std::string()) + text;
}

/// The trigger as the user knows it: memguard's collection after a compile is "compile".
std::string trigger_label(report::GcTrigger t) {
    return t == report::GcTrigger::Memguard ? "compile" : report::trigger_name(t);
}

/// "recompute x2, step x1": the triggers of the collections, in the order of the first of each.
std::string triggers_text(const report::Report& r, const std::vector<report::GrowthCollection>& cs) {
    std::vector<std::pair<std::string, size_t>> counts;
    size_t unended = 0;
    for (const report::GrowthCollection& c : cs) {
        if (!c.collection) {
            ++unended;
            continue;
        }
        const std::string name = trigger_label(r.collections[*c.collection].trigger);
        auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == name; });
        if (it == counts.end()) {
            counts.emplace_back(name, 1);
        } else {
            ++it->second;
        }
    }
    std::string out;
    for (const auto& [name, n] : counts) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    if (unended != 0) out += (out.empty() ? "" : ", ") + std::string("unended x") + std::to_string(unended);
    return out;
}

std::string percent_of(uint64_t part, uint64_t whole) {
    if (whole == 0) return "";
    const auto pct = static_cast<unsigned>(static_cast<long double>(part) * 100 / static_cast<long double>(whole));
    return " (" + std::to_string(pct) + "%)";
}

void print_fate_sites(const std::vector<report::GrowthSite>& sites, const std::vector<std::string>& labels) {
    for (size_t i = 0; i < sites.size(); ++i) {
        print("        %-11s %s  %s\n", human_bytes(sites[i].bytes).c_str(), labels[i].c_str(),
              site_ids_text(sites[i].stack_id, sites[i].python_stack_id).c_str());
    }
}

void print_fate_collections(const report::Report& r, const report::GrowthFate& f) {
    for (size_t i = 0; i < f.collections.size() && i < kGrowthCollections; ++i) {
        const report::GrowthCollection& g = f.collections[i];
        if (!g.collection) {
            print("      %-11s in a collection whose end the report does not have\n", human_bytes(g.bytes).c_str());
            continue;
        }
        const report::Collection& c = r.collections[*g.collection];
        print("      %-11s %s at %s s (generation %d, thread %llu)%s\n", human_bytes(g.bytes).c_str(),
              trigger_label(c.trigger).c_str(), report::seconds_fixed3(c.t).c_str(), c.generation,
              static_cast<unsigned long long>(c.tid), c.explanation ? ", explained" : "");
    }
    if (f.collections.size() > kGrowthCollections) {
        print("      and %s more\n",
              plural(f.collections.size() - kGrowthCollections, "collection", "collections").c_str());
    }
}

/// What became of the growth, and what to do about each part (docs/steps.md).
void print_fate(const report::Report& r, const StepsView& v) {
    const report::GrowthFate& f = v.fate;
    const report::Growth& g = *v.growth;
    if (f.folded) {
        print("  What became of it: not known: the detail up to the end of step %u is folded into figures\n"
              "    (memguard compact), which keep no block of the growth\n",
              step_number(r, v, g.last));
        return;
    }
    if (f.growth_bytes == 0) return;
    const uint32_t first = step_number(r, v, g.first);
    const uint32_t final_step = step_number(r, v, v.rows.size() - 1);
    const std::string growth = human_bytes(f.growth_bytes);
    if (f.exact) {
        print("  What became of it (+%s, the blocks the grown sites added after the end of step %u):\n", growth.c_str(),
              first);
    } else {
        print("  What became of it (+%s, the growth of the segments):\n", growth.c_str());
    }
    if (f.collected_bytes != 0) {
        print("    Cycles: %s (%s) freed %s of the %s growth%s\n",
              plural(f.collections.size(), "collection", "collections").c_str(),
              triggers_text(r, f.collections).c_str(), human_bytes(f.collected_bytes).c_str(), growth.c_str(),
              percent_of(f.collected_bytes, f.growth_bytes).c_str());
        const uint64_t known = std::min(f.known_bytes, f.collected_bytes);
        if (!f.exact && known != 0) {
            print("      (%s known: segments of the growth freed while a collection ran, or the storages that\n"
                  "      explained collections found in them)\n",
                  human_bytes(known).c_str());
        }
        if (!f.exact && f.collected_bytes != known) {
            const uint32_t from = step_number(r, v, f.window_first), to = step_number(r, v, f.window_last);
            const std::string steps = from == to ? "step " + std::to_string(from)
                                                 : "steps " + std::to_string(from) + " to " + std::to_string(to);
            print("      (%s estimated: collections in %s%s freed %s of PyTorch's\n"
                  "      allocated bytes; what a step's collections freed beyond %s, the median step's,\n"
                  "      counts. PyTorch keeps what they freed cached: the segments stay, later steps reuse them)\n",
                  human_bytes(f.collected_bytes - known).c_str(), steps.c_str(),
                  f.window_tail ? " and after the last" : "", human_bytes(f.window_bytes).c_str(),
                  human_bytes(f.baseline_bytes).c_str());
        }
        print_fate_collections(r, f);
        if (!f.collected_sites.empty()) print("      sites whose growth they freed:\n");
        print_fate_sites(f.collected_sites, v.collected_labels);
    }
    if (f.released_bytes != 0) {
        print("    Released: the program freed %s of it before the end of step %u (not in a collection)\n",
              human_bytes(f.released_bytes).c_str(), final_step);
    }
    if (f.held_bytes != 0) {
        const uint64_t untested = f.held_bytes - f.held_tested_bytes;
        std::string through = "no full collection ran while it was live";
        if (f.full_through) {
            const report::Collection& c = r.collections[*f.full_through];
            const std::string which = "a full collection (" + trigger_label(c.trigger) + " at " +
                                      report::seconds_fixed3(c.t) + " s)";
            through = untested == 0 ? "it was live through " + which
                                    : human_bytes(f.held_tested_bytes) + " of it was live through " + which;
        }
        print("    Still held: %s%s at the end of step %u\n      %s\n", human_bytes(f.held_bytes).c_str(),
              percent_of(f.held_bytes, f.growth_bytes).c_str(), final_step, through.c_str());
        if (!f.held_sites.empty()) print("      sites that hold it:\n");
        print_fate_sites(f.held_sites, v.held_labels);
    }
    print("  What to do:\n");
    if (f.collected_bytes != 0) {
        bool explained = false;
        for (const report::GrowthCollection& c : f.collections) {
            explained = explained || (c.collection && r.collections[*c.collection].explanation);
        }
        print("    - %s was garbage held by reference cycles until a collection ran: collect at step\n"
              "      ends (MEMGUARD_GC_EVERY_STEPS=1) or break the cycle.\n",
              human_bytes(f.collected_bytes).c_str());
        if (explained) {
            print("      `memguard cycles --explain %s` shows what held it.\n", r.path.c_str());
        } else {
            print("      memguard explains the garbage of its own collections (MEMGUARD_EXPLAIN_CYCLES=1, the\n"
                  "      default): with MEMGUARD_GC_EVERY_STEPS=1, `memguard cycles --explain` shows what held it.\n");
        }
    }
    if (f.held_tested_bytes != 0) {
        print("    - %s is still referenced (a full collection did not free it): a leak, which collecting\n"
              "      cannot fix. Look at the code of the sites%s: a list, dict or cache that keeps\n"
              "      tensors, or a loss kept with its autograd graph.\n",
              human_bytes(f.held_tested_bytes).c_str(), f.held_sites.empty() ? " that grew" : " that hold it");
    }
    if (f.held_bytes != f.held_tested_bytes) {
        print("    - %s is still held, and no full collection ran while it was live: garbage of a reference\n"
              "      cycle in the oldest generation looks the same as a leak. Run with MEMGUARD_GC_EVERY_STEPS=1:\n"
              "      growth it frees is cycles, growth that stays is a leak.\n",
              human_bytes(f.held_bytes - f.held_tested_bytes).c_str());
    }
    if (f.released_bytes != 0 && f.collected_bytes == 0 && f.held_bytes == 0) {
        print("    - nothing: the program itself freed it later (a delayed release, not a leak).\n");
    }
}

void print_steps(const report::Report& r, const StepsView& v) {
    print("Steps in %s: %s%s\n", r.path.c_str(), plural(r.steps.size(), "step", "steps").c_str(),
          format_note(r, 8).c_str());
    if (r.steps.empty()) {
        print("Steps are recorded when an optimizer's step() returns (torch.optim, found with no code change), or\n"
              "at each memguard.step() call: call it once per step in a training loop without an optimizer.\n");
        return;
    }
    if (r.has_tensors()) {
        print("%s\n", v.series == report::Series::Tensors
                          ? "Bytes: tensor blocks of memguard's allocator (torch.cuda.memory_allocated(); "
                            "--segments: its segments)"
                          : "Bytes: the segments of memguard's allocator (torch.cuda.memory_reserved())");
    }
    // The collections' column only when one freed CUDA memory: most runs have none worth a column.
    const std::string gc_head = v.gc_column ? column("gc freed") : "";
    print("\n%6s %9s %10s %10s %11s %11s%s  %s\n", "step", "end s", "duration s", "peak", "incr. peak", "live at end",
          gc_head.c_str(), "categories at peak");
    for (size_t i = 0; i < v.rows.size(); ++i) {
        const report::StepRow& row = v.rows[i];
        const uint64_t gc = v.collections[i].freed_bytes;
        const std::string gc_text = !v.gc_column ? "" : column(gc == 0 ? "-" : human_bytes(gc));
        print("%6u %9s %10s %10s %11s %11s%s  %s\n", step_number(r, v, i), report::seconds_fixed3(row.t_end).c_str(),
              report::seconds_fixed3(row.t_end - row.t_begin).c_str(), human_bytes(row.peak_bytes).c_str(),
              human_bytes(row.incremental_peak()).c_str(), human_bytes(row.exit_bytes).c_str(), gc_text.c_str(),
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
    print_fate(r, v);
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

void json_fate_sites(report::JsonWriter& j, const std::vector<report::GrowthSite>& sites,
                     const std::vector<std::string>& labels) {
    j.begin_array();
    for (size_t i = 0; i < sites.size(); ++i) {
        j.begin_object();
        j.key("label").value(labels[i]);
        j.key("stack_id").value(sites[i].stack_id);
        j.key("python_stack_id").value(sites[i].python_stack_id);
        j.key("bytes").value(sites[i].bytes);
        j.end_object();
    }
    j.end_array();
}

void json_fate(report::JsonWriter& j, const report::Report& r, const StepsView& v) {
    const report::GrowthFate& f = v.fate;
    j.begin_object();
    j.key("exact").value(f.exact);
    j.key("folded").value(f.folded);
    j.key("growth_bytes").value(f.growth_bytes);
    j.key("collected_bytes").value(f.collected_bytes);
    j.key("released_bytes").value(f.released_bytes);
    j.key("held_bytes").value(f.held_bytes);
    j.key("known_bytes").value(f.known_bytes);
    j.key("window_bytes").value(f.window_bytes);
    j.key("baseline_bytes").value(f.baseline_bytes);
    j.key("collections").begin_array();
    for (const report::GrowthCollection& g : f.collections) {
        j.begin_object();
        j.key("bytes").value(g.bytes);
        if (g.collection) {
            const report::Collection& c = r.collections[*g.collection];
            j.key("t").number(report::seconds_exact(c.t));
            j.key("thread").value(c.tid);
            j.key("trigger").value(report::trigger_name(c.trigger));
            j.key("generation").value(c.generation);
            j.key("explanation");
            if (c.explanation) {
                j.value(r.explanations[*c.explanation].id);
            } else {
                j.null();
            }
        } else {
            j.key("t").null();
        }
        j.end_object();
    }
    j.end_array();
    j.key("collected_sites");
    json_fate_sites(j, f.collected_sites, v.collected_labels);
    j.key("held_sites");
    json_fate_sites(j, f.held_sites, v.held_labels);
    j.key("held_through_full_collection_bytes").value(f.held_tested_bytes);
    j.key("full_collection");
    if (f.full_through) {
        const report::Collection& c = r.collections[*f.full_through];
        j.begin_object();
        j.key("t").number(report::seconds_exact(c.t));
        j.key("trigger").value(report::trigger_name(c.trigger));
        j.end_object();
    } else {
        j.null();
    }
    j.end_object();
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
        j.key("collections").value(v.collections[i].count);
        j.key("collections_freed_bytes").value(v.collections[i].freed_bytes);
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
        j.key("fate");
        json_fate(j, r, v);
        j.end_object();
    }
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_steps(const Args& args) {
    std::optional<report::Report> streamed;
    ReportInput in(args.file);
    std::optional<StepsView> sv = analyse_streamed(in, args, streamed);
    report::Report r = sv ? std::move(*streamed) : in.load();
    print_warnings(r.warnings);
    StepsView v = sv ? std::move(*sv) : analyse(r, args);
    std::cout.flush();
    if (args.json) {
        json_steps(r, v);
    } else {
        print_steps(r, v);
    }
    return kExitOk;
}

}  // namespace memguard::cli

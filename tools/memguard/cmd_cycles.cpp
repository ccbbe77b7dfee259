// memguard cycles FILE [--all] [--frames K] [--json]: the collections, their totals per trigger and what memguard's
// own collections cost against their time budget (docs/cycles.md). In allocator mode (T records) it
// also shows the tensor blocks each collection freed, by site. --explain: cmd_explain.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli.h"
#include "output.h"
#include "report/collections.h"
#include "report/json.h"
#include "report/stream.h"
#include "report/stream_oom.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::GcTrigger;
using report::seconds_fixed3;

// Every trigger, in the order of the format's names (the JSON totals list each).
constexpr GcTrigger kTriggers[] = {GcTrigger::Automatic, GcTrigger::Explicit, GcTrigger::Memguard, GcTrigger::Recompute,
                                   GcTrigger::Step};

/// Whether the text's totals show the trigger: the three of minor 2 always (as before minor 9),
/// recompute and step when they ran.
bool totals_row(GcTrigger t, const report::TriggerTotals& x) {
    return x.count != 0 || t == GcTrigger::Automatic || t == GcTrigger::Explicit || t == GcTrigger::Memguard;
}

/// A share as a percentage with one decimal ("42.8%"); a corrupt report's absurd share in three digits.
std::string share_text(const std::optional<double>& v) {
    if (!v) return "-";
    char buf[64];
    const double pct = *v * 100;
    std::snprintf(buf, sizeof buf, std::fabs(pct) < 1e6 ? "%.1f%%" : "%.3g%%", pct);
    return buf;
}

/// Bytes per millisecond as a JSON integer; null beyond the int64 range (a corrupt report).
void json_rounded(report::JsonWriter& j, const std::optional<double>& v) {
    if (!v || !(std::fabs(*v) < 9.2e18)) {
        j.null();
        return;
    }
    j.value(static_cast<int64_t>(std::llround(*v)));
}

std::string per_ms_text(const std::optional<double>& v) {
    if (!v) return "-";
    if (std::fabs(*v) >= 9.2e18) return *v < 0 ? "-huge" : "huge";  // beyond int64: a corrupt report
    return report::human_bytes_signed(std::llround(*v));
}

/// A ratio as a JSON number ("%.6g"); null when there is none.
void json_ratio(report::JsonWriter& j, const std::optional<double>& v) {
    if (!v || !std::isfinite(*v)) {
        j.null();
        return;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", *v);
    j.number(buf);
}

std::string join(const std::vector<std::string>& ids) {
    std::string out;
    for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
    return out.empty() ? "-" : out;
}

std::string freed_text(const std::optional<int64_t>& bytes) {
    return bytes ? report::human_bytes_signed(*bytes) : std::string("-");
}

std::string explanation_text(const report::Report& r, const report::Collection& c) {
    return c.explanation ? "#" + std::to_string(r.explanations[*c.explanation].id) : "-";
}

void print_table(const report::Report& r, bool all) {
    // Minor 9's columns: the chances the budget skipped before it, and its explanation.
    const bool minor9 = r.format_minor >= 9;
    size_t hidden = 0;
    bool header = false;
    for (const report::Collection& c : r.collections) {
        if (!report::collection_listed(c, all)) {
            ++hidden;
            continue;
        }
        if (!header) {
            print("\n  %9s  %8s  %-9s  %3s  %13s  %9s  %10s  %-20s  %s%s\n", "time (s)", "thread", "trigger", "gen",
                  "duration (ms)", "collected", "CUDA freed", "compiles", "mark age (s)",
                  minor9 ? "  skipped  explained" : "");
            header = true;
        }
        std::string extra;
        if (minor9) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "  %7s  %9s", c.skipped ? std::to_string(*c.skipped).c_str() : "-",
                          explanation_text(r, c).c_str());
            extra = buf;
        }
        print("  %9s  %8llu  %-9s  %3d  %13s  %9lld  %10s  %-20s  %12s%s\n", seconds_fixed3(c.t).c_str(),
              static_cast<unsigned long long>(c.tid), report::trigger_label(c.trigger), c.generation,
              report::milliseconds_fixed3(c.duration_ns).c_str(), static_cast<long long>(c.collected),
              freed_text(c.cuda_bytes_freed).c_str(), join(c.compile_ids).c_str(),
              c.mark_age_ns ? seconds_fixed3(*c.mark_age_ns).c_str() : "-", extra.c_str());
    }
    if (hidden != 0) {
        if (!header) print("\n");
        print("(%s that freed no CUDA memory %s not listed; --all lists %s)\n",
              plural(hidden, "automatic collection", "automatic collections").c_str(), hidden == 1 ? "is" : "are",
              hidden == 1 ? "it" : "them");
    }
}

void print_totals(const report::Report& r, const std::array<report::TriggerTotals, report::kTriggerCount>& totals) {
    print("\n%-18s  %5s  %13s  %9s  %13s  %10s  %12s  %11s  %7s\n", "Totals per trigger", "count", "duration (ms)",
          "collected", "uncollectable", "CUDA freed", "freed per ms", "budget used", "skipped");
    for (GcTrigger t : kTriggers) {
        const report::TriggerTotals& x = totals[report::trigger_index(t)];
        if (!totals_row(t, x)) continue;
        std::string freed = x.with_cuda == 0 && x.count != 0 ? "-" : report::human_bytes_signed(x.cuda_bytes_freed);
        std::string skipped = format::is_memguards(t) && x.with_skipped != 0 ? std::to_string(x.skipped) : "-";
        print("  %-16s  %5llu  %13s  %9lld  %13lld  %10s  %12s  %11s  %7s\n", report::trigger_label(t),
              static_cast<unsigned long long>(x.count), report::milliseconds_fixed3(x.duration_ns).c_str(),
              static_cast<long long>(x.collected), static_cast<long long>(x.uncollectable), freed.c_str(),
              per_ms_text(report::bytes_per_ms(x)).c_str(), share_text(report::budget_used(r, t, x)).c_str(),
              skipped.c_str());
    }
    // The budget rule compares memguard's collections together with the wall time since the first.
    const report::TriggerTotals ours = report::memguards_totals(totals);
    if (ours.count == 0) return;
    std::string wall = r.end_t > 0 ? report::seconds_fixed3(r.end_t) + " s of wall time" : "an unknown wall time";
    print("\nmemguard's collections: %s ms in %s", report::milliseconds_fixed3(ours.duration_ns).c_str(), wall.c_str());
    if (r.gc_budget) {
        print(", %s of the budget (MEMGUARD_GC_BUDGET %s)", share_text(report::budget_used(r, ours)).c_str(),
              share_text(*r.gc_budget).c_str());
    } else {
        print("; the report names no budget (I gc_budget, format 1.9)");
    }
    if (ours.explained != 0)
        print("; %s explained (--explain)", plural(ours.explained, "collection", "collections").c_str());
    print("\n");
}

/// Allocator mode: the tensor blocks freed while one collection ran (t records with gc 1 on its
/// thread, before its Y), by the site of their T record, largest first.
struct GcFrees {
    uint64_t bytes = 0, blocks = 0;
    std::vector<report::Site> sites;
    std::vector<size_t> frames;  // handles into the SiteSymbolizer, one per site
};

/// One entry per collection (index into Report::collections); empty ones for none freed.
std::vector<GcFrees> gc_frees(const report::CollectionFrees& frees, SiteSymbolizer& sym) {
    std::vector<GcFrees> out(frees.by_site.size());
    for (size_t c = 0; c < out.size(); ++c) {
        for (const auto& entry : frees.by_site[c]) {
            out[c].sites.push_back(entry.second);
            out[c].bytes += entry.second.bytes;
            out[c].blocks += entry.second.blocks;
        }
        std::stable_sort(out[c].sites.begin(), out[c].sites.end(), [](const report::Site& a, const report::Site& b) {
            if (a.bytes != b.bytes) return a.bytes > b.bytes;
            return a.blocks > b.blocks;
        });
        for (const report::Site& site : out[c].sites)
            out[c].frames.push_back(sym.add(site.stack_id, site.python_stack_id));
    }
    sym.resolve();
    return out;
}

void print_gc_frees(const report::Report& r, const std::vector<GcFrees>& frees, uint64_t unattributed,
                    const SiteSymbolizer& sym) {
    uint64_t bytes = 0, blocks = 0, collections = 0;
    for (const GcFrees& f : frees) {
        bytes += f.bytes;
        blocks += f.blocks;
        collections += f.blocks != 0 ? 1 : 0;
    }
    print("\nTensor blocks freed during collections (allocator mode): %s in %s, in %s\n",
          report::human_bytes(bytes).c_str(), plural(blocks, "block", "blocks").c_str(),
          plural(collections, "collection", "collections").c_str());
    for (size_t c = 0; c < frees.size(); ++c) {
        const GcFrees& f = frees[c];
        if (f.blocks == 0) continue;
        const report::Collection& y = r.collections[c];
        print("\n  t=%s s, thread %llu, %s (gen %d): %s in %s\n", seconds_fixed3(y.t).c_str(),
              static_cast<unsigned long long>(y.tid), report::trigger_label(y.trigger), y.generation,
              report::human_bytes(f.bytes).c_str(), plural(f.blocks, "block", "blocks").c_str());
        for (size_t i = 0; i < f.sites.size(); ++i) {
            const report::Site& site = f.sites[i];
            print("    #%-3zu %10s  %s, requested %s  %s\n", i + 1, report::human_bytes(site.bytes).c_str(),
                  plural(site.blocks, "block", "blocks").c_str(), report::human_bytes(site.requested).c_str(),
                  site_ids_text(site.stack_id, site.python_stack_id).c_str());
            print_site_frames(sym.get(f.frames[i]), r);
        }
    }
    if (uint64_t n = unattributed) {
        print("\n(%s freed during a collection that has no Y record: the report ended first)\n",
              plural(n, "block", "blocks").c_str());
    }
}

void print_text(const report::Report& r, const Args& args, const std::vector<GcFrees>& frees, uint64_t unattributed,
                const SiteSymbolizer& sym) {
    auto totals = report::collection_totals(r);
    if (r.collections.empty()) {
        print("no garbage collections%s\n", format_note(r, 2).c_str());
    } else {
        print("Garbage collections: %zu (", r.collections.size());
        const char* sep = "";
        for (GcTrigger t : kTriggers) {
            const report::TriggerTotals& x = totals[report::trigger_index(t)];
            if (!totals_row(t, x)) continue;
            print("%s%llu %s", sep, static_cast<unsigned long long>(x.count), report::trigger_label(t));
            sep = ", ";
        }
        print(")\n");
        print_table(r, args.all);
        print_totals(r, totals);
    }
    if (r.has_tensors()) print_gc_frees(r, frees, unattributed, sym);
    print("\nCompiles (torch.compile): %zu\n", r.compiles.size());
}

void json_gc_frees(report::JsonWriter& j, const report::Report& r, const GcFrees& f, const SiteSymbolizer& sym) {
    j.key("tensor_blocks_freed").begin_object();
    j.key("bytes").value(f.bytes);
    j.key("blocks").value(f.blocks);
    j.key("sites").begin_array();
    for (size_t i = 0; i < f.sites.size(); ++i) {
        const report::Site& site = f.sites[i];
        j.begin_object();
        j.key("stack_id").value(site.stack_id);
        j.key("python_stack_id").value(site.python_stack_id);
        j.key("bytes").value(site.bytes);
        j.key("requested_bytes").value(site.requested);
        j.key("blocks").value(site.blocks);
        json_site_frames(j, sym.get(f.frames[i]), r);
        j.end_object();
    }
    j.end_array();
    j.end_object();
}

void print_json(const report::Report& r, const std::vector<GcFrees>& frees, uint64_t unattributed,
                const SiteSymbolizer& sym) {
    report::JsonWriter j;
    j.begin_object();
    j.key("file").value(r.path);
    j.key("collections").begin_array();
    for (size_t ci = 0; ci < r.collections.size(); ++ci) {
        const report::Collection& c = r.collections[ci];
        j.begin_object();
        j.key("time_s").number(report::seconds_exact(c.t));
        j.key("tid").value(c.tid);
        j.key("trigger").value(report::trigger_name(c.trigger));
        j.key("generation").value(c.generation);
        j.key("duration_s").number(report::seconds_exact(c.duration_ns));
        j.key("collected").value(c.collected);
        j.key("uncollectable").value(c.uncollectable);
        j.key("cuda_bytes_freed").value_or_null(c.cuda_bytes_freed);
        j.key("compile_ids").begin_array();
        for (const std::string& id : c.compile_ids) j.value(id);
        j.end_array();
        j.key("mark_age_s");
        if (c.mark_age_ns) {
            j.number(report::seconds_exact(*c.mark_age_ns));
        } else {
            j.null();
        }
        j.key("skipped").value_or_null(c.skipped);
        j.key("explanation");
        if (c.explanation) {
            j.value(r.explanations[*c.explanation].id);
        } else {
            j.null();
        }
        // Allocator mode only (the file has T records).
        if (r.has_tensors()) json_gc_frees(j, r, frees[ci], sym);
        j.end_object();
    }
    j.end_array();
    auto totals = report::collection_totals(r);
    j.key("totals").begin_object();
    for (GcTrigger t : kTriggers) {
        const report::TriggerTotals& x = totals[report::trigger_index(t)];
        j.key(report::trigger_name(t)).begin_object();
        j.key("count").value(x.count);
        j.key("duration_s").number(report::seconds_exact(x.duration_ns));
        j.key("collected").value(x.collected);
        j.key("uncollectable").value(x.uncollectable);
        j.key("cuda_bytes_freed").value(x.cuda_bytes_freed);
        j.key("cuda_bytes_freed_per_ms");
        json_rounded(j, report::bytes_per_ms(x));
        j.key("budget_used");
        json_ratio(j, report::budget_used(r, t, x));
        j.key("skipped");
        if (format::is_memguards(t) && (x.with_skipped != 0 || x.count == 0)) {
            j.value(x.skipped);
        } else {
            j.null();
        }
        j.key("explained").value(x.explained);
        j.end_object();
    }
    j.end_object();
    const report::TriggerTotals ours = report::memguards_totals(totals);
    j.key("budget").begin_object();
    j.key("gc_budget");
    json_ratio(j, r.gc_budget);
    j.key("wall_s").number(report::seconds_exact(r.end_t));
    j.key("duration_s").number(report::seconds_exact(ours.duration_ns));
    j.key("used");
    json_ratio(j, report::budget_used(r, ours));
    j.end_object();
    j.key("compiles").value(static_cast<uint64_t>(r.compiles.size()));
    if (r.has_tensors()) j.key("tensor_blocks_freed_without_collection").value(unattributed);
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_cycles(const Args& args) {
    if (args.explain) return run_cycles_explain(args);
    // The streaming reader (report/stream_oom.h: the tensors freed in each collection, folded while
    // reading); load_report where site labels need backward_sites, and for a pipe that could not be
    // spooled.
    ReportInput in(args.file);
    report::CollectionFrees freed;
    report::CollectionFreesObserver observer;
    std::optional<report::Report> streamed = in.stream(observer);
    if (streamed && !streamed->backward_pending) {
        freed = observer.take();
    } else {
        streamed = in.load();
        freed = report::collection_frees(*streamed);
    }
    const report::Report& r = *streamed;
    print_warnings(r.warnings);
    SiteSymbolizer sym(r, args.frames);
    std::vector<GcFrees> frees = gc_frees(freed, sym);
    std::cout.flush();
    if (args.json) {
        print_json(r, frees, freed.unattributed, sym);
    } else {
        print_text(r, args, frees, freed.unattributed, sym);
    }
    return kExitOk;
}

}  // namespace memguard::cli

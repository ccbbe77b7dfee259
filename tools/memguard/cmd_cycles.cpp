// memguard cycles FILE [--all] [--json]
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "report/collections.h"
#include "report/json.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::GcTrigger;
using report::seconds_fixed3;

constexpr GcTrigger kTriggers[] = {GcTrigger::Automatic, GcTrigger::Explicit, GcTrigger::Memguard};

std::string join(const std::vector<std::string>& ids) {
    std::string out;
    for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
    return out.empty() ? "-" : out;
}

std::string freed_text(const std::optional<int64_t>& bytes) {
    return bytes ? report::human_bytes_signed(*bytes) : std::string("-");
}

void print_table(const report::Report& r, bool all) {
    size_t hidden = 0;
    bool header = false;
    for (const report::Collection& c : r.collections) {
        if (!report::collection_listed(c, all)) {
            ++hidden;
            continue;
        }
        if (!header) {
            std::printf("\n  %9s  %8s  %-9s  %3s  %13s  %9s  %10s  %-20s  %s\n", "time (s)", "thread", "trigger", "gen",
                        "duration (ms)", "collected", "CUDA freed", "compiles", "mark age (s)");
            header = true;
        }
        std::printf("  %9s  %8llu  %-9s  %3d  %13s  %9lld  %10s  %-20s  %12s\n", seconds_fixed3(c.t).c_str(),
                    static_cast<unsigned long long>(c.tid), report::trigger_name(c.trigger), c.generation,
                    report::milliseconds_fixed3(c.duration_ns).c_str(), static_cast<long long>(c.collected),
                    freed_text(c.cuda_bytes_freed).c_str(), join(c.compile_ids).c_str(),
                    c.mark_age_ns ? seconds_fixed3(*c.mark_age_ns).c_str() : "-");
    }
    if (hidden != 0) {
        std::printf("%s(%s that freed no CUDA memory %s not listed; --all lists %s)\n", header ? "" : "\n",
                    plural(hidden, "automatic collection", "automatic collections").c_str(),
                    hidden == 1 ? "is" : "are", hidden == 1 ? "it" : "them");
    }
}

void print_totals(const std::array<report::TriggerTotals, report::kTriggerCount>& totals) {
    std::printf("\n%-18s  %5s  %13s  %9s  %13s  %10s\n", "Totals per trigger", "count", "duration (ms)", "collected",
                "uncollectable", "CUDA freed");
    for (GcTrigger t : kTriggers) {
        const report::TriggerTotals& x = totals[report::trigger_index(t)];
        std::string freed = x.with_cuda == 0 && x.count != 0 ? "-" : report::human_bytes_signed(x.cuda_bytes_freed);
        std::printf("  %-16s  %5llu  %13s  %9lld  %13lld  %10s\n", report::trigger_name(t),
                    static_cast<unsigned long long>(x.count), report::milliseconds_fixed3(x.duration_ns).c_str(),
                    static_cast<long long>(x.collected), static_cast<long long>(x.uncollectable), freed.c_str());
    }
}

void print_text(const report::Report& r, const Args& args) {
    auto totals = report::collection_totals(r);
    if (r.collections.empty()) {
        std::printf("no garbage collections%s\n", format_note(r, 2).c_str());
    } else {
        std::printf("Garbage collections: %zu (%llu automatic, %llu explicit, %llu memguard)\n", r.collections.size(),
                    static_cast<unsigned long long>(totals[0].count), static_cast<unsigned long long>(totals[1].count),
                    static_cast<unsigned long long>(totals[2].count));
        print_table(r, args.all);
        print_totals(totals);
    }
    std::printf("\nCompiles (torch.compile): %zu\n", r.compiles.size());
}

void print_json(const report::Report& r) {
    report::JsonWriter j;
    j.begin_object();
    j.key("file").value(r.path);
    j.key("collections").begin_array();
    for (const report::Collection& c : r.collections) {
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
        j.end_object();
    }
    j.end_object();
    j.key("compiles").value(static_cast<uint64_t>(r.compiles.size()));
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_cycles(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    std::cout.flush();
    if (args.json) {
        print_json(r);
    } else {
        print_text(r, args);
    }
    return kExitOk;
}

}  // namespace memguard::cli

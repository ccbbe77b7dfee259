// memguard check FILE [--max-peak SIZE] [--max-tensor-peak SIZE] [--max-live-at-exit SIZE]
//                     [--max-tensor-live-at-exit SIZE] [--max-gc-freed SIZE] [--no-hazards] [--no-oom] [--json]
// A gate for CI (docs/gates.md): exit 1 with one line per limit the run exceeded, 0 with one line
// saying what passed. Every figure is the one `summary` and `cycles` report (the same analyses),
// so a failed check can be looked into with them and with `top`.
#include <algorithm>
#include <iostream>

#include "cli.h"
#include "output.h"
#include "report/json.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::GateInt;
using report::human_bytes;

constexpr size_t kSitesShown = 3;  // the largest sites that make up a peak or the memory at exit
constexpr size_t kSiteFrames = 6;

/// Which live set a byte limit is about, for the sites that make it up.
enum class LiveAt { None, Peak, TensorPeak, Exit, TensorExit };

/// One limit of the command line and what the report measured.
struct Check {
    const char* name = "";    // "max_peak": the option without dashes, the JSON key
    const char* option = "";  // "--max-peak"
    const char* what = "";    // "peak", as the text says it
    bool bytes = true;        // a size; else a count whose limit is 0 (--no-hazards, --no-oom)
    GateInt limit = 0;
    GateInt value = 0;
    LiveAt live = LiveAt::None;
    std::string detail;  // after the figures: what makes them up, or where to look
    std::string note;    // " (format 1.0 does not record them)" when the report cannot have them
    bool failed() const { return value > limit; }
};

std::string exact_bytes(GateInt v) {
    return report::gate_bytes_text(v) + (v >= 1024 || v <= -1024 ? " (" + report::gate_int_text(v) + " B)" : "");
}

/// All the figures check can gate, whether limited or not (--json gives them all).
struct Measured {
    report::Summary s;
    bool allocator = false;
    GateInt gc_freed = 0;
    uint64_t collections = 0;
    GateInt oom() const { return static_cast<GateInt>(s.oom_events) + s.tensor_oom_events; }
};

/// The tensor limits need tensor blocks: a run without memguard's allocator has none to measure,
/// and passing such a check would hide that it measured nothing.
void require_allocator_mode(const report::Report& r, bool allocator, const char* option) {
    if (allocator) return;
    throw report::ReportError(std::string(option) + ": " + r.path +
                              " was not recorded in allocator mode (MEMGUARD_ALLOCATOR=memguard), so it has no "
                              "tensor blocks to measure; --max-peak and --max-live-at-exit measure its GPU memory");
}

std::vector<Check> checks_of(const Args& args, const report::Report& r, const Measured& m) {
    std::vector<Check> out;
    auto limit = [&out](const char* name, const char* option, const char* what, uint64_t lim, GateInt value,
                        LiveAt live) {
        Check c;
        c.name = name;
        c.option = option;
        c.what = what;
        c.limit = lim;
        c.value = value;
        c.live = live;
        out.push_back(c);
    };
    const report::Summary& s = m.s;
    if (args.max_peak) limit("max_peak", "--max-peak", "peak", *args.max_peak, s.peak_bytes, LiveAt::Peak);
    if (args.max_tensor_peak) {
        require_allocator_mode(r, m.allocator, "--max-tensor-peak");
        limit("max_tensor_peak", "--max-tensor-peak", "tensor peak", *args.max_tensor_peak, s.tensor_peak_bytes,
              LiveAt::TensorPeak);
    }
    if (args.max_live_at_exit) {
        limit("max_live_at_exit", "--max-live-at-exit", "live at exit", *args.max_live_at_exit, s.live_bytes_at_exit,
              LiveAt::Exit);
    }
    if (args.max_tensor_live_at_exit) {
        require_allocator_mode(r, m.allocator, "--max-tensor-live-at-exit");
        limit("max_tensor_live_at_exit", "--max-tensor-live-at-exit", "tensors live at exit",
              *args.max_tensor_live_at_exit, s.tensor_live_bytes_at_exit, LiveAt::TensorExit);
    }
    if (args.max_gc_freed) {
        limit("max_gc_freed", "--max-gc-freed", "freed by gc", *args.max_gc_freed, m.gc_freed, LiveAt::None);
        out.back().note = format_note(r, 2);
        out.back().detail = plural(m.collections, "collection", "collections") + out.back().note +
                            " (memguard cycles " + r.path + ")";
    }
    if (args.no_hazards) {
        limit("no_hazards", "--no-hazards", "hazards", 0, s.hazards(), LiveAt::None);
        out.back().bytes = false;
        out.back().note = format_note(r, 1);
        out.back().detail = plural(s.unsafe_calls, "unsafe call", "unsafe calls") + ", " +
                            plural(s.frees_while_graph_alive, "free while a graph is alive",
                                   "frees while a graph is alive") +
                            ", " + plural(s.warmup_retention, "warm-up retention", "warm-up retentions") +
                            out.back().note + " (memguard hazards " + r.path + ")";
    }
    if (args.no_oom) {
        limit("no_oom", "--no-oom", "OOM events", 0, m.oom(), LiveAt::None);
        out.back().bytes = false;
        out.back().detail = plural(s.oom_events, "failed allocation out of memory", "failed allocations out of memory");
        if (m.allocator)
            out.back().detail += ", " + plural(s.tensor_oom_events, "allocator OOM event", "allocator OOM events");
        out.back().detail += " (memguard summary " + r.path + ")";
    }
    return out;
}

/// The largest sites of the live set a failed byte limit is about, symbolized together.
struct SiteLines {
    std::vector<std::vector<report::Site>> sites;  // per check
    std::vector<std::vector<size_t>> handles;      // into the symbolizer, per check
    std::vector<uint64_t> totals;                  // per check: the bytes live then
    std::vector<std::optional<int64_t>> times;     // per check: when (peaks)
};

SiteLines failed_sites(const report::Report& r, const Measured& m, const std::vector<Check>& checks,
                       SiteSymbolizer& sym) {
    SiteLines out;
    for (const Check& c : checks) {
        report::SiteTable table;
        std::optional<int64_t> t;
        const report::TimePoint exit{report::TimePoint::Exit, 0};
        if (c.failed()) {
            switch (c.live) {
            case LiveAt::None: break;
            case LiveAt::Peak:
                table = site_table_at_peak(r, false, &m.s);
                t = m.s.peak_t;
                break;
            case LiveAt::TensorPeak:
                table = site_table_at_peak(r, true, &m.s);
                t = m.s.tensor_peak_t;
                break;
            case LiveAt::Exit:
                table = report::group_by_site(r, report::live_at(r, exit, &m.s), report::KindFilter::Gpu);
                break;
            case LiveAt::TensorExit:
                table = report::group_tensors_by_site(r, report::tensors_live_at(r, exit, nullptr, &m.s));
                break;
            }
        }
        if (table.sites.size() > kSitesShown) table.sites.resize(kSitesShown);
        out.handles.emplace_back();
        for (const report::Site& site : table.sites) {
            out.handles.back().push_back(sym.add(site.stack_id, site.python_stack_id));
        }
        out.sites.push_back(std::move(table.sites));
        out.totals.push_back(table.total_bytes);
        out.times.push_back(t);
    }
    sym.resolve();
    return out;
}

std::string figure(const Check& c, GateInt v) {
    return c.bytes ? report::gate_bytes_text(v) : report::gate_int_text(v);
}

/// "peak 2.75 GiB (2952790016 B) > --max-peak 2.00 GiB (2147483648 B), over by 768.00 MiB"
std::string failure_line(const Check& c) {
    if (!c.bytes)
        return std::string(c.what) + " " + report::gate_int_text(c.value) + " > 0 (" + c.option + "): " + c.detail;
    std::string line = std::string(c.what) + " " + exact_bytes(c.value) + " > " + c.option + " " +
                       exact_bytes(c.limit) + ", over by " + report::gate_bytes_text(c.value - c.limit);
    return c.detail.empty() ? line : line + "; " + c.detail;
}

void print_text(const report::Report& r, const std::vector<Check>& checks, const SiteLines& lines,
                const SiteSymbolizer& sym) {
    size_t failed = 0;
    for (size_t i = 0; i < checks.size(); ++i) {
        const Check& c = checks[i];
        if (!c.failed()) continue;
        ++failed;
        std::string line = failure_line(c);
        if (!lines.sites[i].empty()) {
            line += lines.times[i] ? "; at t=" + report::seconds_fixed3(*lines.times[i]) + " s:" : "; by site:";
        }
        print("FAIL %s\n", line.c_str());
        std::vector<std::string> labels;
        for (size_t h : lines.handles[i]) labels.push_back(site_label(sym.get(h), r));
        for (size_t k = 0; k < lines.sites[i].size(); ++k) {
            const report::Site& site = lines.sites[i][k];
            // Sites that differ below the frames a label shows are told apart by their stacks.
            std::string label = labels[k];
            if (std::count(labels.begin(), labels.end(), labels[k]) > 1) {
                label += " " + site_ids_text(site.stack_id, site.python_stack_id);
            }
            print("       %10s %6s  %s\n", human_bytes(site.bytes).c_str(),
                  report::percent(site.bytes, lines.totals[i]).c_str(), label.c_str());
        }
    }
    if (failed != 0) return;
    std::string passed;
    for (const Check& c : checks) {
        passed += passed.empty() ? "" : ", ";
        passed += c.bytes ? std::string(c.what) + " " + figure(c, c.value) + " <= " + figure(c, c.limit)
                          : std::string(c.what) + " 0";
        passed += c.note;
    }
    print("memguard check: %s passed %s: %s\n", r.path.c_str(), plural(checks.size(), "check", "checks").c_str(),
          passed.c_str());
}

void json_figure(report::JsonWriter& j, const char* key, GateInt v) { j.key(key).number(report::gate_int_text(v)); }

void print_json(const report::Report& r, const Measured& m, const std::vector<Check>& checks, const SiteLines& lines,
                const SiteSymbolizer& sym) {
    report::JsonWriter j;
    bool passed = true;
    for (const Check& c : checks) passed = passed && !c.failed();
    j.begin_object();
    j.key("file").value(r.path);
    j.key("passed").value(passed);
    j.key("allocator_mode").value(m.allocator);
    j.key("limits").begin_object();
    for (const Check& c : checks) {
        if (c.bytes) {
            json_figure(j, (std::string(c.name) + "_bytes").c_str(), c.limit);
        } else {
            j.key(c.name).value(true);
        }
    }
    j.end_object();
    // Every figure check gates, limited or not: the tensor ones only in allocator mode.
    j.key("measured").begin_object();
    j.key("peak_bytes").value(m.s.peak_bytes);
    j.key("live_at_exit_bytes").value(m.s.live_bytes_at_exit);
    j.key("tensor_peak_bytes");
    m.allocator ? j.value(m.s.tensor_peak_bytes) : j.null();
    j.key("tensor_live_at_exit_bytes");
    m.allocator ? j.value(m.s.tensor_live_bytes_at_exit) : j.null();
    json_figure(j, "gc_freed_bytes", m.gc_freed);
    j.key("hazards").value(m.s.hazards());
    json_figure(j, "oom_events", m.oom());
    j.end_object();
    j.key("violations").begin_array();
    for (size_t i = 0; i < checks.size(); ++i) {
        const Check& c = checks[i];
        if (!c.failed()) continue;
        j.begin_object();
        j.key("check").value(c.name);
        j.key("option").value(c.option);
        json_figure(j, c.bytes ? "limit_bytes" : "limit", c.limit);
        json_figure(j, c.bytes ? "value_bytes" : "value", c.value);
        j.key("message").value(failure_line(c));
        if (c.live != LiveAt::None) {
            j.key("sites").begin_array();
            for (size_t k = 0; k < lines.sites[i].size(); ++k) {
                const report::Site& site = lines.sites[i][k];
                j.begin_object();
                j.key("label").value(site_label(sym.get(lines.handles[i][k]), r));
                j.key("bytes").value(site.bytes);
                j.key("blocks").value(site.blocks);
                j.key("stack_id").value(site.stack_id);
                j.key("python_stack_id").value(site.python_stack_id);
                j.end_object();
            }
            j.end_array();
        }
        j.end_object();
    }
    j.end_array();
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_check(const Args& args) {
    const report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    Measured m;
    m.s = report::summarize(r);
    m.allocator = allocator_mode(r);
    for (size_t t = 0; t < report::kTriggerCount; ++t) {
        m.gc_freed += m.s.cuda_bytes_freed[t];
        m.collections += m.s.collections[t];
    }
    const std::vector<Check> checks = checks_of(args, r, m);
    SiteSymbolizer sym(r, kSiteFrames);
    const SiteLines lines = failed_sites(r, m, checks, sym);
    std::cout.flush();
    if (args.json) {
        print_json(r, m, checks, lines, sym);
    } else {
        print_text(r, checks, lines, sym);
    }
    for (const Check& c : checks) {
        if (c.failed()) return kExitGateFailed;
    }
    return kExitOk;
}

}  // namespace memguard::cli

// memguard summary FILE [--json]
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "categories_view.h"
#include "cli.h"
#include "common/text.h"
#include "output.h"
#include "report/categories.h"
#include "report/json.h"
#include "report/oom.h"
#include "report/stream.h"
#include "report/stream_oom.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;
using report::seconds_exact;
using report::seconds_fixed3;

/// An I record's value, or nothing when absent or "-".
std::optional<std::string> info(const report::Report& r, const std::string& key) {
    auto it = r.info.find(key);
    if (it == r.info.end() || it->second == "-" || it->second.empty()) return std::nullopt;
    return it->second;
}

std::optional<int64_t> info_int(const report::Report& r, const std::string& key) {
    auto v = info(r, key);
    return v ? text::parse_sdec(*v) : std::nullopt;
}

std::string bytes_exact(uint64_t n) { return human_bytes(n) + (n >= 1024 ? " (" + std::to_string(n) + " B)" : ""); }

std::string live_text(uint64_t bytes, uint64_t blocks) {
    return human_bytes(bytes) + " in " + plural(blocks, "block", "blocks");
}

std::string peak_text(uint64_t bytes, const std::optional<int64_t>& t) {
    return t ? human_bytes(bytes) + " at t=" + seconds_fixed3(*t) + " s" : std::string("0 B");
}

void line(const char* label, const std::string& value) { print("%-14s%s\n", label, value.c_str()); }

std::string process_text(const report::Report& r) {
    std::string out = info(r, "exe").value_or("(unknown executable)");
    std::vector<std::string> parts;
    if (auto pid = info(r, "pid")) parts.push_back("pid " + *pid);
    if (auto host = info(r, "host")) parts.push_back("host " + *host);
    if (auto rank = info(r, "rank")) parts.push_back("rank " + *rank);
    for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? " (" : ", ") + parts[i];
    return parts.empty() ? out : out + ")";
}

void print_kinds(const report::Summary& s) {
    print("\nBy kind    %11s %12s %12s  %s\n", "allocations", "allocated", "peak", "live at exit");
    for (size_t k = 0; k < report::kKindCount; ++k) {
        const report::KindStats& ks = s.by_kind[k];
        if (ks.allocations == 0) continue;
        std::string live = live_text(ks.live_bytes_at_exit, ks.live_blocks_at_exit);
        print("  %-8s %11llu %12s %12s  %s\n", report::kind_name(static_cast<report::Kind>(k)),
              static_cast<unsigned long long>(ks.allocations), human_bytes(ks.bytes_allocated).c_str(),
              human_bytes(ks.peak_bytes).c_str(), live.c_str());
    }
}

void print_devices(const report::Summary& s) {
    if (s.by_device.empty()) return;
    print("\nBy device (GPU kinds)\n");
    for (const auto& [dev, d] : s.by_device) {
        std::string text = plural(d.allocations, "allocation", "allocations") + ", peak " +
                           peak_text(d.peak_bytes, d.peak_t) + ", live at exit " +
                           live_text(d.live_bytes_at_exit, d.live_blocks_at_exit);
        if (d.live_handles_at_exit != 0) {
            text += " and " + plural(d.live_handles_at_exit, "physical handle", "physical handles");
        }
        if (d.failed_allocations != 0) {
            text += ", " + plural(d.failed_allocations, "failed allocation", "failed allocations") + " (" +
                    std::to_string(d.oom_events) + " OOM)";
        }
        print("  cuda:%-4d %s\n", dev, text.c_str());
    }
}

/// Format 1.3: driver virtual memory management, only when the run used it.
void print_virtual(const report::Summary& s) {
    const report::VirtualStats& v = s.virt;
    if (!v.any) return;
    print("\nVirtual memory (driver)  %12s %12s\n", "at end", "peak");
    print("  %-22s %12s %12s  %s\n", "address space reserved", human_bytes(v.reserved_bytes).c_str(),
          human_bytes(v.peak_reserved_bytes).c_str(),
          (plural(v.reserves, "reserve", "reserves") + ", " + std::to_string(v.address_frees) + " freed").c_str());
    print("  %-22s %12s %12s  %s\n", "mapped", human_bytes(v.mapped_bytes).c_str(),
          human_bytes(v.peak_mapped_bytes).c_str(),
          (plural(v.maps, "map", "maps") + ", " + plural(v.unmaps, "unmap", "unmaps")).c_str());
    std::string handles = plural(v.creates, "handle", "handles") + " created, " + std::to_string(v.releases) +
                          " released, " + std::to_string(v.physical_handles) + " with memory at end";
    print("  %-22s %12s %12s  %s\n", "physical", human_bytes(v.physical_bytes).c_str(),
          human_bytes(v.peak_physical_bytes).c_str(), handles.c_str());
    if (v.physical_bytes != v.physical_device_bytes) {
        print("  %-22s %12s\n", "physical, not on a GPU",
              human_bytes(v.physical_bytes - v.physical_device_bytes).c_str());
    }
    if (v.imports != 0) {
        print("  %-22s %12s %12s  %s\n", "mapped, imported", human_bytes(v.imported_mapped_bytes).c_str(), "",
              (plural(v.imports, "handle", "handles") + " imported: other processes' memory, not physical here")
                  .c_str());
    }
}

constexpr report::GcTrigger kTriggers[] = {report::GcTrigger::Automatic, report::GcTrigger::Explicit,
                                           report::GcTrigger::Memguard, report::GcTrigger::Recompute,
                                           report::GcTrigger::Step};

/// The lines of format 1.1 (captures, hazards) and 1.2 (collections, compiles).
void print_runtime(const report::Report& r, const report::Summary& s) {
    if (r.format_minor >= 1) {
        std::string captures = std::to_string(s.captures) + ", " + plural(s.execs, "graph exec", "graph execs") + ", " +
                               plural(s.launches, "launch", "launches");
        if (s.graphs_alive_at_exit + s.execs_alive_at_exit != 0) {
            captures += " (alive at exit: " + plural(s.graphs_alive_at_exit, "graph", "graphs") + ", " +
                        plural(s.execs_alive_at_exit, "exec", "execs") + ")";
        }
        line("Captures", captures);
        std::string hazards = std::to_string(s.hazards());
        if (s.hazards() != 0) {
            hazards += " (" + plural(s.unsafe_calls, "unsafe call", "unsafe calls") + ", " +
                       plural(s.frees_while_graph_alive, "free while a graph is alive",
                              "frees while a graph is alive") +
                       ", " + plural(s.warmup_retention, "warm-up retention", "warm-up retentions") + ")";
        }
        line("Hazards", hazards);
    }
    if (r.format_minor >= 2) {
        uint64_t total = 0;
        std::string parts;
        for (report::GcTrigger t : kTriggers) {
            size_t i = static_cast<size_t>(t);
            // Minor 9's triggers only when they ran: the line of older reports stays as it was.
            if (s.collections[i] == 0 && (t == report::GcTrigger::Recompute || t == report::GcTrigger::Step)) continue;
            total += s.collections[i];
            parts += std::string(parts.empty() ? "" : ", ") + std::to_string(s.collections[i]) + " " +
                     report::trigger_name(t) + " (" + report::human_bytes_signed(s.cuda_bytes_freed[i]) +
                     " CUDA freed)";
        }
        line("Collections", total == 0 ? std::string("0") : std::to_string(total) + ": " + parts);
        line("Compiles", std::to_string(s.compiles));
    }
}

/// Allocator mode (format 1.5): the O records' largest sites, labelled by their frames.
constexpr size_t kOomSitesShown = 5;

void json_peak(report::JsonWriter& j, uint64_t bytes, const std::optional<int64_t>& t);

/// One label per shown o record, per O, in order.
std::vector<std::vector<std::string>> oom_site_labels(const report::Report& r) {
    SiteSymbolizer sym(r, 6);
    std::vector<std::vector<size_t>> handles;
    for (const report::TensorOom& o : r.tensor_ooms) {
        handles.emplace_back();
        for (size_t i = 0; i < o.sites.size() && i < kOomSitesShown; ++i) {
            handles.back().push_back(sym.add(o.sites[i].stack_id, o.sites[i].python_stack_id));
        }
    }
    sym.resolve();
    std::vector<std::vector<std::string>> out;
    for (const auto& h : handles) {
        out.emplace_back();
        for (size_t i : h) out.back().push_back(site_label(sym.get(i), r));
    }
    return out;
}

void print_tensors(const report::Report& r, const report::Summary& s) {
    if (!allocator_mode(r)) return;
    print("\nAllocator mode (memguard)\n");
    print("  %-22s %s (%s freed, %s during collections)\n", "tensor blocks",
          std::to_string(s.tensor_allocations).c_str(), std::to_string(s.tensor_frees).c_str(),
          std::to_string(s.tensor_gc_frees).c_str());
    print("  %-22s %s\n", "peak tensor memory",
          s.tensor_peak_t ? (bytes_exact(s.tensor_peak_bytes) + " at t=" + seconds_fixed3(*s.tensor_peak_t) +
                             " s (requested " + human_bytes(s.tensor_peak_requested) + ")")
                                .c_str()
                          : "0 B");
    print("  %-22s %s\n", "tensor memory at exit",
          live_text(s.tensor_live_bytes_at_exit, s.tensor_live_blocks_at_exit).c_str());
    print("  %-22s %zu\n", "allocator OOM events", r.tensor_ooms.size());
    auto labels = oom_site_labels(r);
    for (size_t k = 0; k < r.tensor_ooms.size(); ++k) {
        const report::TensorOom& o = r.tensor_ooms[k];
        print("    t=%s s, thread %llu, device %d: requested %s (%s rounded); allocated %s, reserved %s, "
              "limit %s; tried: %s\n",
              seconds_fixed3(o.t).c_str(), static_cast<unsigned long long>(o.tid), o.device,
              human_bytes(o.requested).c_str(), human_bytes(o.rounded).c_str(), human_bytes(o.allocated).c_str(),
              human_bytes(o.reserved).c_str(), o.limit == 0 ? "none" : human_bytes(o.limit).c_str(), o.rescued.c_str());
        for (size_t i = 0; i < labels[k].size(); ++i) {
            const report::OomSite& site = o.sites[i];
            print("      #%zu %10s in %-10s %s  %s\n", i + 1, human_bytes(site.bytes).c_str(),
                  plural(site.blocks, "block", "blocks").c_str(), labels[k][i].c_str(),
                  site_ids_text(site.stack_id, site.python_stack_id).c_str());
        }
        if (o.sites.size() > labels[k].size()) {
            print("      (%s more)\n", plural(o.sites.size() - labels[k].size(), "site", "sites").c_str());
        }
    }
}

void json_tensors(report::JsonWriter& j, const report::Report& r, const report::Summary& s) {
    if (!allocator_mode(r)) return;
    j.key("tensors").begin_object();
    j.key("allocations").value(s.tensor_allocations);
    j.key("frees").value(s.tensor_frees);
    j.key("gc_frees").value(s.tensor_gc_frees);
    json_peak(j, s.tensor_peak_bytes, s.tensor_peak_t);
    j.key("peak_requested_bytes").value(s.tensor_peak_requested);
    j.key("live_bytes_at_exit").value(s.tensor_live_bytes_at_exit);
    j.key("live_blocks_at_exit").value(s.tensor_live_blocks_at_exit);
    auto labels = oom_site_labels(r);
    j.key("oom_events").begin_array();
    for (size_t k = 0; k < r.tensor_ooms.size(); ++k) {
        const report::TensorOom& o = r.tensor_ooms[k];
        j.begin_object();
        j.key("time_s").number(seconds_exact(o.t));
        j.key("tid").value(o.tid);
        j.key("device").value(o.device);
        j.key("requested_bytes").value(o.requested);
        j.key("rounded_bytes").value(o.rounded);
        j.key("allocated_bytes").value(o.allocated);
        j.key("reserved_bytes").value(o.reserved);
        j.key("limit_bytes").value(o.limit);
        j.key("stack_id").value(o.stack_id);
        j.key("python_stack_id").value(o.python_stack_id);
        j.key("rescued").value(o.rescued);
        j.key("site_count").value(static_cast<uint64_t>(o.sites.size()));
        j.key("sites").begin_array();
        for (size_t i = 0; i < labels[k].size(); ++i) {
            j.begin_object();
            j.key("stack_id").value(o.sites[i].stack_id);
            j.key("python_stack_id").value(o.sites[i].python_stack_id);
            j.key("blocks").value(o.sites[i].blocks);
            j.key("bytes").value(o.sites[i].bytes);
            j.key("label").value(labels[k][i]);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_array();
    j.end_object();
}

/// The categories of the GPU memory at the peak (docs/categories.md), each with its largest site: in
/// allocator mode at the tensor peak (as `top` takes it), where the activations are; else the GPU peak.
constexpr size_t kCategorySites = 3;

/// The categories' point: in allocator mode the tensor peak, else the GPU peak; none without a peak.
bool categories_at_tensor_peak(const report::Report& r, const report::Summary& s) {
    return allocator_mode(r) && s.tensor_peak_t;
}
bool has_categories(const report::Report& r, const report::Summary& s) {
    return categories_at_tensor_peak(r, s) || s.peak_t;
}
/// The sites a part shows: its largest in the text, kCategorySites in JSON.
size_t category_sites(bool json) { return json ? kCategorySites : 1; }

void print_categories(const report::Report& r, const report::Summary& s,
                      const std::optional<report::Breakdown>& categories) {
    if (!categories) return;
    const bool tensors = categories_at_tensor_peak(r, s);
    CategoryView view(r, *categories, 6);
    std::string head = std::string(tensors ? "Categories at the tensor peak" : "Categories at peak") +
                       " (t=" + seconds_fixed3(tensors ? *s.tensor_peak_t : *s.peak_t) +
                       " s): " + human_bytes(view.breakdown().total);
    if (view.estimated_bytes() != 0) head += ", " + human_bytes(view.estimated_bytes()) + " of it estimated";
    print("\n%s; %s\n", head.c_str(), view.moment_text().c_str());
    view.print_text(false, false);
}

void json_categories(report::JsonWriter& j, const report::Report& r, const report::Summary& s,
                     const std::optional<report::Breakdown>& categories) {
    j.key("categories_at_peak");
    if (!categories) {
        j.null();
        return;
    }
    const bool tensors = categories_at_tensor_peak(r, s);
    CategoryView view(r, *categories, 6);
    j.begin_object();
    j.key("peak").value(tensors ? "tensors" : "gpu");
    j.key("time_s").number(seconds_exact(tensors ? *s.tensor_peak_t : *s.peak_t));
    view.json(j, false);
    j.end_object();
}

/// The out-of-memory events `memguard oom` explains, and the CUDA failures PyTorch recovered from.
struct OomCounts {
    size_t ooms = 0, recovered = 0;
};

OomCounts oom_counts(const std::vector<report::OomEvent>& events) {
    OomCounts n;
    for (const report::OomEvent& e : events) ++(e.recovered ? n.recovered : n.ooms);
    return n;
}

/// One line each for the steps and the out-of-memory events, pointing at the command that shows them.
void print_steps_and_ooms(const report::Report& r, const OomCounts& counts) {
    if (!r.steps.empty()) {
        line("Steps",
             plural(r.steps.size(), "step", "steps") + " (memguard steps " + r.path + ": peaks, categories, growth)");
    }
    const auto [ooms, recovered] = counts;
    if (ooms != 0 || recovered != 0) {
        std::string text = plural(ooms, "out of memory", "out of memory");
        if (recovered != 0) text += ", " + plural(recovered, "CUDA failure recovered", "CUDA failures recovered");
        line("OOM", text + " (memguard oom " + r.path + " explains " + (ooms == 1 ? "it" : "them") + ")");
    }
}

std::string format_text(const report::Report& r) {
    auto minor = info_int(r, "format_minor");
    return std::to_string(r.version) + (minor && *minor >= 0 ? "." + std::to_string(*minor) : "");
}

/// What summary prints of a report besides the report itself.
struct Answer {
    report::Summary s;
    OomCounts ooms;
    std::optional<report::Breakdown> categories;  // at the peak (has_categories)
};

/// A bounded report's detail (MEMGUARD_MAX_REPORT_SIZE): all there, or from when.
std::string detail_text(const report::Report& r) {
    auto limit = info(r, "report_limit");
    const std::string bound = limit ? "MEMGUARD_MAX_REPORT_SIZE " + human_bytes(text::parse_dec(*limit).value_or(0))
                                    : "its limit";
    std::string folded;
    if (r.detail_folded > 0) {
        folded = std::to_string(r.detail_folded) +
                 " allocations and frees up to t=" + seconds_fixed3(r.detail_folded_until) +
                 " s folded into figures (memguard compact): the counts and peaks below are the whole run's";
    }
    if (r.detail_dropped == 0) {
        if (folded.empty()) return "every allocation and free (a bounded report: " + bound + ")";
        return "from t=" + seconds_fixed3(r.detail_folded_until) + " s (a bounded report: " + bound + "); " + folded;
    }
    return "from t=" + seconds_fixed3(std::max(r.detail_dropped_until, r.detail_folded_until)) +
           " s: the writer deleted " + std::to_string(r.detail_dropped) +
           " allocations and frees without a fold to stay under " + bound +
           "; the figures below count what was live then and what came after" +
           (folded.empty() ? std::string()
                           : " (" + std::to_string(r.detail_folded) + " more up to t=" +
                                 seconds_fixed3(r.detail_folded_until) + " s are folded into figures)");
}

void print_text(const report::Report& r, const Answer& a) {
    const report::Summary& s = a.s;
    const OomCounts& counts = a.ooms;
    std::string state = s.complete ? "complete" : "INCOMPLETE: no end record";
    if (r.lost_records > 0) {
        state += std::string(s.complete ? "," : ";") + " " + std::to_string(r.lost_records) + " records lost";
    }
    line("Report", r.path + " (format " + format_text(r) + ", " + state + ")");
    line("Process", process_text(r));
    if (auto cmd = info(r, "cmdline")) line("Command line", *cmd);
    line("Duration", seconds_fixed3(s.duration_ns) + " s" + (s.complete ? "" : " (up to the last record)"));
    if (r.bounded) line("Detail", detail_text(r));
    std::string allocs = std::to_string(s.allocations) + " (" + std::to_string(s.frees) + " freed";
    if (s.failed_frees != 0) allocs += ", " + plural(s.failed_frees, "failed free", "failed frees");
    line("Allocations", allocs + ")");
    line("Failed allocs",
         std::to_string(s.failed_allocations) + " (" + std::to_string(s.oom_events) + " with an out-of-memory error)");
    line("Peak GPU", s.peak_t ? bytes_exact(s.peak_bytes) + " at t=" + seconds_fixed3(*s.peak_t) + " s" : "0 B");
    std::string live_at_exit = bytes_exact(s.live_bytes_at_exit) + " in " +
                               plural(s.live_blocks_at_exit, "block", "blocks");
    if (s.virt.physical_device_handles != 0) {
        live_at_exit += " and " + plural(s.virt.physical_device_handles, "physical handle", "physical handles");
    }
    line("Live at exit", live_at_exit);
    print_steps_and_ooms(r, counts);
    print_runtime(r, s);
    if (s.allocations != 0) print_kinds(s);
    print_devices(s);
    print_virtual(s);
    print_tensors(r, s);
    print_categories(r, s, a.categories);
}

void json_peak(report::JsonWriter& j, uint64_t bytes, const std::optional<int64_t>& t) {
    j.key("peak_bytes").value(bytes);
    j.key("peak_time_s");
    if (t) {
        j.number(seconds_exact(*t));
    } else {
        j.null();
    }
}

void json_kinds(report::JsonWriter& j, const report::Summary& s) {
    j.key("by_kind").begin_object();
    for (size_t k = 0; k < report::kKindCount; ++k) {
        const report::KindStats& ks = s.by_kind[k];
        j.key(report::kind_name(static_cast<report::Kind>(k))).begin_object();
        j.key("allocations").value(ks.allocations);
        j.key("frees").value(ks.frees);
        j.key("bytes_allocated").value(ks.bytes_allocated);
        json_peak(j, ks.peak_bytes, ks.peak_t);
        j.key("live_bytes_at_exit").value(ks.live_bytes_at_exit);
        j.key("live_blocks_at_exit").value(ks.live_blocks_at_exit);
        j.end_object();
    }
    j.end_object();
}

void json_devices(report::JsonWriter& j, const report::Summary& s) {
    j.key("by_device").begin_object();
    for (const auto& [dev, d] : s.by_device) {
        j.key(std::to_string(dev)).begin_object();
        j.key("allocations").value(d.allocations);
        j.key("bytes_allocated").value(d.bytes_allocated);
        j.key("failed_allocations").value(d.failed_allocations);
        j.key("oom_events").value(d.oom_events);
        json_peak(j, d.peak_bytes, d.peak_t);
        j.key("live_bytes_at_exit").value(d.live_bytes_at_exit);
        j.key("live_blocks_at_exit").value(d.live_blocks_at_exit);
        j.key("live_handles_at_exit").value(d.live_handles_at_exit);
        j.end_object();
    }
    j.end_object();
}

void json_process(report::JsonWriter& j, const report::Report& r) {
    j.key("exe").value_or_null(info(r, "exe"));
    j.key("pid").value_or_null(info_int(r, "pid"));
    j.key("host").value_or_null(info(r, "host"));
    j.key("rank").value_or_null(info_int(r, "rank"));
    j.key("cmdline").value_or_null(info(r, "cmdline"));
}

void json_runtime(report::JsonWriter& j, const report::Summary& s) {
    j.key("captures").value(s.captures);
    j.key("graph_execs").value(s.execs);
    j.key("launches").value(s.launches);
    j.key("graphs_alive_at_exit").value(s.graphs_alive_at_exit);
    j.key("execs_alive_at_exit").value(s.execs_alive_at_exit);
    j.key("hazards").value(s.hazards());
    j.key("hazards_by_kind").begin_object();
    j.key("unsafe_call").value(s.unsafe_calls);
    j.key("free_live_graph").value(s.frees_while_graph_alive);
    j.key("warmup_retention").value(s.warmup_retention);
    j.end_object();
    j.key("collections").begin_object();
    for (report::GcTrigger t : kTriggers) j.key(report::trigger_name(t)).value(s.collections[static_cast<size_t>(t)]);
    j.end_object();
    j.key("cuda_bytes_freed_by_collections").begin_object();
    for (report::GcTrigger t : kTriggers) {
        j.key(report::trigger_name(t)).value(s.cuda_bytes_freed[static_cast<size_t>(t)]);
    }
    j.end_object();
    j.key("compiles").value(s.compiles);
}

void json_virtual(report::JsonWriter& j, const report::Summary& s) {
    const report::VirtualStats& v = s.virt;
    j.key("virtual").begin_object();
    j.key("reserved_bytes").value(v.reserved_bytes);
    j.key("mapped_bytes").value(v.mapped_bytes);
    j.key("physical_bytes").value(v.physical_bytes);
    j.key("physical_device_bytes").value(v.physical_device_bytes);
    j.key("physical_handles").value(v.physical_handles);
    j.key("imported_mapped_bytes").value(v.imported_mapped_bytes);
    j.key("peak_reserved_bytes").value(v.peak_reserved_bytes);
    j.key("peak_mapped_bytes").value(v.peak_mapped_bytes);
    j.key("peak_physical_bytes").value(v.peak_physical_bytes);
    j.key("counts").begin_object();
    j.key("reserves").value(v.reserves);
    j.key("address_frees").value(v.address_frees);
    j.key("creates").value(v.creates);
    j.key("releases").value(v.releases);
    j.key("maps").value(v.maps);
    j.key("unmaps").value(v.unmaps);
    j.key("imports").value(v.imports);
    j.end_object();
    j.end_object();
}

void print_json(const report::Report& r, const Answer& a) {
    const report::Summary& s = a.s;
    report::JsonWriter j;
    j.begin_object();
    j.key("file").value(r.path);
    j.key("format_version").value(r.version);
    j.key("format_minor").value_or_null(info_int(r, "format_minor"));
    j.key("complete").value(s.complete);
    j.key("lost_records").value(r.lost_records);
    if (r.bounded) {  // MEMGUARD_MAX_REPORT_SIZE: what of the detail was deleted
        j.key("detail_dropped").value(r.detail_dropped);
        j.key("detail_folded").value(r.detail_folded);
        j.key("detail_from_s");
        if (r.detail_dropped > 0 || r.detail_folded > 0) {
            j.number(seconds_exact(std::max(r.detail_dropped_until, r.detail_folded_until)));
        } else {
            j.null();
        }
    }
    json_process(j, r);
    j.key("duration_s").number(seconds_exact(s.duration_ns));
    j.key("allocations").value(s.allocations);
    j.key("frees").value(s.frees);
    j.key("failed_frees").value(s.failed_frees);
    j.key("failed_allocations").value(s.failed_allocations);
    j.key("oom_events").value(s.oom_events);
    j.key("steps").value(static_cast<uint64_t>(r.steps.size()));
    const auto [ooms, recovered] = a.ooms;
    j.key("ooms").value(static_cast<uint64_t>(ooms));  // as memguard oom counts them
    j.key("recovered_cuda_failures").value(static_cast<uint64_t>(recovered));
    json_peak(j, s.peak_bytes, s.peak_t);
    j.key("live_bytes_at_exit").value(s.live_bytes_at_exit);
    j.key("live_blocks_at_exit").value(s.live_blocks_at_exit);
    json_kinds(j, s);
    json_devices(j, s);
    json_runtime(j, s);
    json_virtual(j, s);
    json_tensors(j, r, s);
    json_categories(j, r, s, a.categories);
    j.key("warnings").begin_array();
    for (const std::string& w : r.warnings) j.value(w);
    j.end_array();
    j.end_object();
    std::cout << j.str();
}

}  // namespace

bool allocator_mode(const report::Report& r) {
    auto it = r.info.find("allocator");
    return (it != r.info.end() && it->second == "memguard") || r.has_tensors() || !r.tensor_ooms.empty();
}

namespace {

void print_summary(const report::Report& r, const Answer& a, const Args& args) {
    std::cout.flush();
    if (args.json) {
        print_json(r, a);
    } else {
        print_text(r, a);
    }
}

/// The answer from the streaming reader (report/stream.h): one pass for the figures, the live set at
/// the peak, the OOMs and the tensor tags (a second pass for a peak that kept coming back), the
/// categories at the peak by PointBreakdowns; the report of the peak in `r`. Nothing where only
/// load_report answers: site labels that need backward_sites, OOMs that OomObserver could not match
/// (a report written out of time order), and a pipe that could not be spooled.
std::optional<Answer> stream_summary(ReportInput& in, const Args& args, std::optional<report::Report>& out) {
    report::SummaryBuilder builder;
    report::PeakObserver peaks;
    report::OomObserver failures(false);  // counts only: no live sets
    report::TensorTagObserver tags;
    report::Observers all({&builder, &peaks, &failures, &tags});
    std::optional<report::Report> read = in.stream(all);
    if (!read || read->backward_pending) return std::nullopt;
    report::Report& r = *read;
    const std::optional<std::vector<report::OomEvent>> events = failures.ooms(r);
    if (!events) return std::nullopt;
    Answer a;
    a.ooms = oom_counts(*events);
    a.s = builder.take(r);
    if (has_categories(r, a.s)) {
        const bool tensors = categories_at_tensor_peak(r, a.s);
        const size_t at = tensors ? a.s.tensor_peak_events : a.s.peak_events;
        report::LiveSet live;
        if (peaks.has(tensors, at)) {
            r = peaks.take(tensors, std::move(r), 0, live);
        } else {
            report::PointObserver point(at, std::nullopt, true);
            in.again(point);
            r = point.take(std::move(r), 0, live);
        }
        // The report of the point keeps the stacks, steps and moments of the whole one.
        const std::unordered_map<size_t, report::Category> tag_map = tags.take();
        report::PointBreakdowns breakdowns(r, CategoryView::options(category_sites(args.json)), &tag_map);
        // The time of the point's last event: the peak's (a peak is reached by an event).
        a.categories = breakdowns.at(r, live, at, tensors ? *a.s.tensor_peak_t : *a.s.peak_t);
    }
    out = std::move(r);
    return a;
}

}  // namespace

int run_summary(const Args& args) {
    ReportInput in(args.file);
    std::optional<report::Report> streamed;
    if (std::optional<Answer> a = stream_summary(in, args, streamed)) {
        print_warnings(streamed->warnings);
        print_summary(*streamed, *a, args);
        return kExitOk;
    }
    const report::Report r = in.load();
    print_warnings(r.warnings);
    Answer a;
    a.s = report::summarize(r);
    a.ooms = oom_counts(report::find_ooms(r));
    if (has_categories(r, a.s)) {
        const size_t at = categories_at_tensor_peak(r, a.s) ? a.s.tensor_peak_events : a.s.peak_events;
        a.categories = report::breakdown_at(r, at, CategoryView::options(category_sites(args.json)));
    }
    print_summary(r, a, args);
    return kExitOk;
}

}  // namespace memguard::cli

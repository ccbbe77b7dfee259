// memguard hazards FILE [--frames K] [--json]
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "output.h"
#include "report/captures.h"
#include "report/json.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;
using report::seconds_fixed3;

/// The hazards and the frames of every site they show.
struct HazardView {
    std::vector<size_t> free_sites;  // per free_live_graph hazard: handle into the symbolizer
    std::vector<report::RetentionBoundary> boundaries;
    std::vector<std::vector<size_t>> boundary_sites;  // per boundary, per site
};

HazardView build_view(const report::Report& r, SiteSymbolizer& sym) {
    HazardView v;
    for (const report::FreeWhileGraphAlive& h : r.hazards.frees_while_graph_alive) {
        const report::Block* b = h.block ? &r.blocks[*h.block] : nullptr;
        v.free_sites.push_back(sym.add(b ? b->stack_id : 0, b ? b->python_stack_id : 0));
    }
    v.boundaries = report::retention_boundaries(r);
    for (const report::RetentionBoundary& b : v.boundaries) {
        std::vector<size_t> handles;
        for (const report::RetentionSite& s : b.sites) handles.push_back(sym.add(s.stack_id, 0));
        v.boundary_sites.push_back(std::move(handles));
    }
    sym.resolve();
    return v;
}

void print_unsafe(const report::Report& r) {
    const auto& calls = r.hazards.unsafe_calls;
    print("Unsafe calls during stream capture: %s\n", calls.empty() ? "none" : std::to_string(calls.size()).c_str());
    if (calls.empty()) return;
    print("  %9s  %8s  %-24s  %7s  %-12s  %s\n", "time (s)", "thread", "api", "capture", "capture mode", "thread mode");
    for (const report::UnsafeCall& u : calls) {
        print("  %9s  %8llu  %-24s  %7u  %-12s  %s\n", seconds_fixed3(u.t).c_str(),
              static_cast<unsigned long long>(u.tid), u.api.c_str(), u.capture_id,
              report::capture_mode_name(u.capture_mode), report::capture_mode_name(u.thread_mode));
    }
}

void print_frees(const report::Report& r, const HazardView& v, const SiteSymbolizer& sym) {
    const auto& frees = r.hazards.frees_while_graph_alive;
    print("\nFrees of capture-owned memory while a graph exec of the capture is alive: %s\n",
          frees.empty() ? "none" : std::to_string(frees.size()).c_str());
    for (size_t i = 0; i < frees.size(); ++i) {
        const report::FreeWhileGraphAlive& h = frees[i];
        if (i == 0) {
            print("  %9s  %8s  %-16s  %10s  %7s  %s\n", "time (s)", "thread", "address", "size", "capture", "exec");
        } else {
            print("\n");
        }
        print("  %9s  %8llu  %-16s  %10s  %7u  %s\n", seconds_fixed3(h.t).c_str(),
              static_cast<unsigned long long>(h.tid), hex(h.addr).c_str(), human_bytes(h.size).c_str(), h.capture_id,
              hex(h.exec).c_str());
        if (!h.block) {
            print("      allocation site unknown (no such block in the report)\n");
            continue;
        }
        const report::Block& b = r.blocks[*h.block];
        print("      allocated at t=%s s by thread %llu %s:\n", seconds_fixed3(b.t_alloc).c_str(),
              static_cast<unsigned long long>(b.tid), site_ids_text(b.stack_id, b.python_stack_id).c_str());
        print_site_frames(sym.get(v.free_sites[i]), r);
    }
}

void print_retention(const report::Report& r, const HazardView& v, const SiteSymbolizer& sym) {
    print("\nWarm-up retention at capture boundaries: %s\n",
          v.boundaries.empty() ? "none" : (std::to_string(v.boundaries.size()) + ", biggest first").c_str());
    if (v.boundaries.empty()) return;
    print("(memory allocated since the end of the previous capture, owned by no capture, still live)\n");
    for (size_t i = 0; i < v.boundaries.size(); ++i) {
        const report::RetentionBoundary& b = v.boundaries[i];
        print("\ncapture %u %s at t=%s s: %s in %s allocated since t=%s s, from %s\n", b.capture_id,
              report::capture_phase_name(b.phase), seconds_fixed3(b.t).c_str(), human_bytes(b.bytes).c_str(),
              plural(b.blocks, "block", "blocks").c_str(), seconds_fixed3(b.since).c_str(),
              plural(b.sites.size(), "site", "sites").c_str());
        for (size_t s = 0; s < b.sites.size(); ++s) {
            const report::RetentionSite& site = b.sites[s];
            print("\n  #%-3zu %10s %7s  %s  %s\n", s + 1, human_bytes(site.bytes).c_str(),
                  report::percent(site.bytes, b.bytes).c_str(), plural(site.blocks, "block", "blocks").c_str(),
                  site_ids_text(site.stack_id, 0).c_str());
            print_site_frames(sym.get(v.boundary_sites[i][s]), r);
        }
    }
}

void print_text(const report::Report& r, const HazardView& v, const SiteSymbolizer& sym) {
    if (r.hazards.unsafe_calls.empty() && r.hazards.frees_while_graph_alive.empty() && v.boundaries.empty()) {
        print("no hazards%s\n", format_note(r, 1).c_str());
        return;
    }
    print_unsafe(r);
    print_frees(r, v, sym);
    print_retention(r, v, sym);
}

void print_json(const report::Report& r, const HazardView& v, const SiteSymbolizer& sym) {
    report::JsonWriter j;
    j.begin_object();
    j.key("file").value(r.path);
    j.key("unsafe_calls").begin_array();
    for (const report::UnsafeCall& u : r.hazards.unsafe_calls) {
        j.begin_object();
        j.key("time_s").number(report::seconds_exact(u.t));
        j.key("tid").value(u.tid);
        j.key("api").value(u.api);
        j.key("capture_id").value(u.capture_id);
        j.key("capture_mode").value(report::capture_mode_name(u.capture_mode));
        j.key("thread_mode").value(report::capture_mode_name(u.thread_mode));
        j.end_object();
    }
    j.end_array();
    j.key("frees_while_graph_alive").begin_array();
    for (size_t i = 0; i < r.hazards.frees_while_graph_alive.size(); ++i) {
        const report::FreeWhileGraphAlive& h = r.hazards.frees_while_graph_alive[i];
        const report::Block* b = h.block ? &r.blocks[*h.block] : nullptr;
        j.begin_object();
        j.key("time_s").number(report::seconds_exact(h.t));
        j.key("tid").value(h.tid);
        j.key("address").value(hex(h.addr));
        j.key("size").value(h.size);
        j.key("capture_id").value(h.capture_id);
        j.key("exec").value(hex(h.exec));
        j.key("allocated_s");
        if (b) {
            j.number(report::seconds_exact(b->t_alloc));
        } else {
            j.null();
        }
        j.key("stack_id");
        b ? j.value(b->stack_id) : j.null();
        j.key("python_stack_id");
        b ? j.value(b->python_stack_id) : j.null();
        json_site_frames(j, sym.get(v.free_sites[i]), r);
        j.end_object();
    }
    j.end_array();
    j.key("warmup_retention").begin_array();
    for (size_t i = 0; i < v.boundaries.size(); ++i) {
        const report::RetentionBoundary& b = v.boundaries[i];
        j.begin_object();
        j.key("capture_id").value(b.capture_id);
        j.key("phase").value(report::capture_phase_name(b.phase));
        j.key("time_s").number(report::seconds_exact(b.t));
        j.key("since_s").number(report::seconds_exact(b.since));
        j.key("bytes").value(b.bytes);
        j.key("blocks").value(b.blocks);
        j.key("sites").begin_array();
        for (size_t s = 0; s < b.sites.size(); ++s) {
            j.begin_object();
            j.key("stack_id").value(b.sites[s].stack_id);
            j.key("blocks").value(b.sites[s].blocks);
            j.key("bytes").value(b.sites[s].bytes);
            json_site_frames(j, sym.get(v.boundary_sites[i][s]), r);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_array();
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_hazards(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    SiteSymbolizer sym(r, args.frames);
    HazardView v = build_view(r, sym);
    std::cout.flush();
    if (args.json) {
        print_json(r, v, sym);
    } else {
        print_text(r, v, sym);
    }
    return kExitOk;
}

}  // namespace memguard::cli

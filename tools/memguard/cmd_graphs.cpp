// memguard graphs FILE [--json]
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

std::string opt_hex(const std::optional<uint64_t>& v) { return v ? hex(*v) : "-"; }

/// Execs whose graph came from no capture memguard saw (G capture id 0, or an unknown capture).
struct OtherExecs {
    uint64_t count = 0, launches = 0, alive = 0;
};

OtherExecs other_execs(const report::Report& r) {
    OtherExecs o;
    for (const report::GraphExec& e : r.execs) {
        if (e.capture_id != 0 && r.find_capture(e.capture_id) != nullptr) continue;
        ++o.count;
        o.launches += e.launches;
        o.alive += e.t_destroy ? 0 : 1;
    }
    return o;
}

void print_details(const report::Report& r, const report::CaptureStats& s) {
    const report::Capture& c = *s.capture;
    const char* indent = "         ";
    if (!c.t_end) print("%sstill capturing at exit\n", indent);
    if (s.owned_handles != 0) {
        print("%sphysical memory (cuMemCreate): %s, %llu alive at exit (in owned and live at exit)\n", indent,
              plural(s.owned_handles, "handle", "handles").c_str(),
              static_cast<unsigned long long>(s.live_owned_handles_at_exit));
    }
    if (s.owned_tensor_blocks != 0) {
        print("%stensor blocks from its private pool (memguard's allocator): %s, %s; live at exit: %s, %s\n", indent,
              plural(s.owned_tensor_blocks, "block", "blocks").c_str(), human_bytes(s.owned_tensor_bytes).c_str(),
              plural(s.live_owned_tensor_blocks_at_exit, "block", "blocks").c_str(),
              human_bytes(s.live_owned_tensor_bytes_at_exit).c_str());
    }
    if (c.target_graph) print("%scaptured into graph %s\n", indent, hex(*c.target_graph).c_str());
    if (c.graph) {
        std::string fate = c.t_graph_destroy ? "destroyed at " + seconds_fixed3(*c.t_graph_destroy) + " s"
                                             : std::string("alive at exit");
        print("%sgraph %s: %s\n", indent, hex(*c.graph).c_str(), fate.c_str());
    }
    for (size_t i : s.execs) {
        const report::GraphExec& e = r.execs[i];
        std::string fate = e.t_destroy ? "destroyed at " + seconds_fixed3(*e.t_destroy) + " s"
                                       : std::string("alive at exit");
        print("%sexec %s: instantiated at %s s, %s, %s\n", indent, hex(e.exec).c_str(),
              seconds_fixed3(e.t_instantiate).c_str(), plural(e.launches, "launch", "launches").c_str(), fate.c_str());
    }
}

void print_text(const report::Report& r, const std::vector<report::CaptureStats>& stats) {
    report::Summary sum = report::summarize(r);
    OtherExecs other = other_execs(r);
    if (stats.empty()) {
        print("no stream captures%s\n", format_note(r, 1).c_str());
    } else {
        print("%s; %s, %s; alive at exit: %s, %s\n\n",
              plural(sum.captures, "stream capture", "stream captures").c_str(),
              plural(sum.execs, "graph exec", "graph execs").c_str(),
              plural(sum.launches, "launch", "launches").c_str(),
              plural(sum.graphs_alive_at_exit, "graph", "graphs").c_str(),
              plural(sum.execs_alive_at_exit, "exec", "execs").c_str());
        print("%7s  %-14s  %-12s  %8s  %9s  %9s  %5s  %-14s  %5s  %8s  %10s  %6s  %12s  %s\n", "capture", "stream",
              "mode", "thread", "begin (s)", "end (s)", "error", "graph", "execs", "launches", "owned", "blocks",
              "live at exit", "destroyed");
    }
    for (const report::CaptureStats& s : stats) {
        const report::Capture& c = *s.capture;
        print("%7u  %-14s  %-12s  %8llu  %9s  %9s  %5s  %-14s  %5zu  %8llu  %10s  %6llu  %12s  %s\n", c.id,
              hex(c.stream).c_str(), report::capture_mode_name(c.mode), static_cast<unsigned long long>(c.tid),
              seconds_fixed3(c.t_begin).c_str(), c.t_end ? seconds_fixed3(*c.t_end).c_str() : "-",
              c.t_end ? std::to_string(c.end_error).c_str() : "-", opt_hex(c.graph).c_str(), s.execs.size(),
              static_cast<unsigned long long>(s.launches), human_bytes(s.owned_bytes).c_str(),
              static_cast<unsigned long long>(s.owned_blocks), human_bytes(s.live_owned_bytes_at_exit).c_str(),
              s.destroyed ? "yes" : "no");
        print_details(r, s);
    }
    if (other.count != 0) {
        print("\nGraph execs of graphs from no capture memguard saw: %llu (%s, %llu alive at exit)\n",
              static_cast<unsigned long long>(other.count), plural(other.launches, "launch", "launches").c_str(),
              static_cast<unsigned long long>(other.alive));
    }
}

void json_opt_hex(report::JsonWriter& j, const char* key, const std::optional<uint64_t>& v) {
    j.key(key);
    if (v) {
        j.value(hex(*v));
    } else {
        j.null();
    }
}

void json_opt_seconds(report::JsonWriter& j, const char* key, const std::optional<int64_t>& t) {
    j.key(key);
    if (t) {
        j.number(report::seconds_exact(*t));
    } else {
        j.null();
    }
}

void print_json(const report::Report& r, const std::vector<report::CaptureStats>& stats) {
    report::JsonWriter j;
    j.begin_array();
    for (const report::CaptureStats& s : stats) {
        const report::Capture& c = *s.capture;
        j.begin_object();
        j.key("capture_id").value(c.id);
        j.key("stream").value(hex(c.stream));
        j.key("mode").value(report::capture_mode_name(c.mode));
        j.key("tid").value(c.tid);
        j.key("begin_s").number(report::seconds_exact(c.t_begin));
        json_opt_seconds(j, "end_s", c.t_end);
        j.key("end_error");
        if (c.t_end) {
            j.value(c.end_error);
        } else {
            j.null();
        }
        json_opt_hex(j, "target_graph", c.target_graph);
        json_opt_hex(j, "graph", c.graph);
        json_opt_seconds(j, "graph_destroyed_s", c.t_graph_destroy);
        j.key("graph_alive_at_exit").value(s.graph_alive_at_exit);
        j.key("execs").begin_array();
        for (size_t i : s.execs) {
            const report::GraphExec& e = r.execs[i];
            j.begin_object();
            j.key("exec").value(hex(e.exec));
            j.key("instantiated_s").number(report::seconds_exact(e.t_instantiate));
            json_opt_seconds(j, "destroyed_s", e.t_destroy);
            j.key("launches").value(e.launches);
            j.end_object();
        }
        j.end_array();
        j.key("execs_alive_at_exit").value(s.execs_alive_at_exit);
        j.key("launches").value(s.launches);
        j.key("owned_bytes").value(s.owned_bytes);
        j.key("owned_blocks").value(s.owned_blocks);
        j.key("live_owned_bytes_at_exit").value(s.live_owned_bytes_at_exit);
        j.key("live_owned_blocks_at_exit").value(s.live_owned_blocks_at_exit);
        j.key("owned_handles").value(s.owned_handles);
        j.key("live_owned_handles_at_exit").value(s.live_owned_handles_at_exit);
        j.key("owned_tensor_bytes").value(s.owned_tensor_bytes);
        j.key("owned_tensor_blocks").value(s.owned_tensor_blocks);
        j.key("live_owned_tensor_bytes_at_exit").value(s.live_owned_tensor_bytes_at_exit);
        j.key("live_owned_tensor_blocks_at_exit").value(s.live_owned_tensor_blocks_at_exit);
        j.key("destroyed").value(s.destroyed);
        j.end_object();
    }
    j.end_array();
    std::cout << j.str();
}

}  // namespace

int run_graphs(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    std::vector<report::CaptureStats> stats = report::capture_stats(r);
    std::cout.flush();
    if (args.json) {
        print_json(r, stats);
    } else {
        print_text(r, stats);
    }
    return kExitOk;
}

}  // namespace memguard::cli

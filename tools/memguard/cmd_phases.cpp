// memguard phases FILE [--marks] [--segments] [--json]. In allocator mode (T records) the bytes are
// the tensor blocks' (torch.cuda.memory_allocated()), as `top` shows them; --segments: the segments.
// Read in one pass by the streaming reader (report/stream_phases.h), a pipe too.
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "output.h"
#include "report/json.h"
#include "report/stream_phases.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

// Names are indented two spaces per nesting depth up to this depth; deeper ones stay at its
// indentation and show their depth as a number. An indentation that grew with the depth made the
// output grow with the square of the phases: 100000 nested B records (a 2 MB report) wrote 10 GB.
constexpr int kMaxIndentDepth = 16;

std::string phase_name(const report::Phase& p, int depth) {
    if (depth <= kMaxIndentDepth) return std::string(static_cast<size_t>(depth) * 2, ' ') + p.name;
    return std::string(kMaxIndentDepth * 2, ' ') + "[depth " + std::to_string(depth) + "] " + p.name;
}

/// In allocator mode, a line saying what the byte figures are of.
void print_bytes_note(const report::Report& r, report::Series series) {
    if (!r.has_tensors()) return;
    print("%s\n", series == report::Series::Tensors
                      ? "Bytes: tensor blocks of memguard's allocator (torch.cuda.memory_allocated(); "
                        "--segments: its segments)"
                      : "Bytes: the segments of memguard's allocator (torch.cuda.memory_reserved())");
}

void print_phases(const report::Report& r, report::Series series, const std::vector<report::PhaseStats>& stats) {
    size_t unended = 0;
    for (const report::Phase& p : r.phases) unended += p.t_end ? 0 : 1;
    print("Phases in %s: %s", r.path.c_str(), plural(r.phases.size(), "phase", "phases").c_str());
    if (unended != 0) print(" (%zu never ended)", unended);
    print(", %s%s\n", plural(r.marks.size(), "mark", "marks").c_str(), format_note(r, 4).c_str());
    print_bytes_note(r, series);
    if (stats.empty()) return;
    print("\n%5s %9s %10s %10s %10s %11s %10s  %-10s %8s  %s\n", "id", "begin s", "duration s", "entry", "peak",
          "incr. peak", "exit", "source", "thread", "name");
    for (const report::PhaseStats& s : stats) {
        const report::Phase& p = r.phases[s.index];
        std::string duration = report::seconds_fixed3(s.t_end - p.t_begin) + (p.t_end ? "" : "+");
        print("%5u %9s %10s %10s %10s %11s %10s  %-10s %8llu  %s\n", p.id, report::seconds_fixed3(p.t_begin).c_str(),
              duration.c_str(), human_bytes(s.entry_bytes).c_str(), human_bytes(s.peak_bytes).c_str(),
              human_bytes(s.incremental_peak()).c_str(), human_bytes(s.exit_bytes).c_str(),
              report::phase_source_name(p.source), static_cast<unsigned long long>(p.tid),
              phase_name(p, s.depth).c_str());
    }
    if (unended != 0) print("\n+: never ended; measured to the end of the report\n");
}

void print_marks(const report::Report& r, const std::vector<uint64_t>& levels, report::Series series) {
    print("Marks in %s: %s%s\n", r.path.c_str(), plural(r.marks.size(), "mark", "marks").c_str(),
          format_note(r, 4).c_str());
    print_bytes_note(r, series);
    if (r.marks.empty()) return;
    print("\n%9s %10s  %-10s %8s  %s\n", "time s", "live", "source", "thread", "name");
    for (size_t i = 0; i < r.marks.size(); ++i) {
        const report::Mark& m = r.marks[i];
        print("%9s %10s  %-10s %8llu  %s\n", report::seconds_fixed3(m.t).c_str(), human_bytes(levels[i]).c_str(),
              report::phase_source_name(m.source), static_cast<unsigned long long>(m.tid), m.name.c_str());
    }
}

void json_phases(const report::Report& r, report::Series series, const std::vector<report::PhaseStats>& stats) {
    report::JsonWriter j;
    j.begin_array();
    for (const report::PhaseStats& s : stats) {
        const report::Phase& p = r.phases[s.index];
        j.begin_object();
        j.key("id").value(p.id);
        j.key("name").value(p.name);
        j.key("source").value(report::phase_source_name(p.source));
        j.key("thread").value(p.tid);
        j.key("depth").value(s.depth);
        j.key("parent").value_or_null(s.parent);
        j.key("occurrence").value(s.occurrence);
        j.key("begin_t").number(report::seconds_exact(p.t_begin));
        j.key("end_t");
        if (p.t_end) {
            j.number(report::seconds_exact(*p.t_end));
        } else {
            j.null();
        }
        j.key("ended").value(p.t_end.has_value());
        j.key("duration_s").number(report::seconds_exact(s.t_end - p.t_begin));
        j.key("entry_bytes").value(s.entry_bytes);
        j.key("peak_bytes").value(s.peak_bytes);
        j.key("incremental_peak_bytes").value(s.incremental_peak());
        j.key("peak_t").number(report::seconds_exact(s.peak_t));
        j.key("exit_bytes").value(s.exit_bytes);
        j.key("bytes_of").value(report::series_name(series));
        j.end_object();
    }
    j.end_array();
    std::cout << j.str();
}

void json_marks(const report::Report& r, const std::vector<uint64_t>& levels, report::Series series) {
    report::JsonWriter j;
    j.begin_array();
    for (size_t i = 0; i < r.marks.size(); ++i) {
        const report::Mark& m = r.marks[i];
        j.begin_object();
        j.key("t").number(report::seconds_exact(m.t));
        j.key("thread").value(m.tid);
        j.key("source").value(report::phase_source_name(m.source));
        j.key("name").value(m.name);
        j.key("live_bytes").value(levels[i]);
        j.key("bytes_of").value(report::series_name(series));
        j.end_object();
    }
    j.end_array();
    std::cout << j.str();
}

}  // namespace

int run_phases(const Args& args) {
    // One pass, in memory bounded by what is live and the phases and marks: the figures of both
    // series are folded as the events are read (phase_stats and live_at_mark over load_report's
    // events give the same).
    report::PhaseObserver observer;
    report::Report r = report::stream_report(args.file, observer);
    print_warnings(r.warnings);
    const report::Series series = tensor_view(r, args) ? report::Series::Tensors : report::Series::Gpu;
    std::cout.flush();
    if (args.marks) {
        if (args.json) {
            json_marks(r, observer.mark_levels(series), series);
        } else {
            print_marks(r, observer.mark_levels(series), series);
        }
        return kExitOk;
    }
    const std::vector<report::PhaseStats>& stats = observer.stats(series);
    if (args.json) {
        json_phases(r, series, stats);
    } else {
        print_phases(r, series, stats);
    }
    return kExitOk;
}

}  // namespace memguard::cli

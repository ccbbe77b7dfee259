// memguard merge FILES... | --template T [-n N] [--frames K] [--json]: one row per rank of a
// distributed job, plus the maximum and the sum over the ranks.
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <tuple>

#include "cli.h"
#include "common/text.h"
#include "format/fields.h"
#include "output.h"
#include "report/json.h"
#include "report/saturate.h"
#include "report/timeline.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

/// The glob pattern of rank `rank` in a MEMGUARD_OUTPUT template: %r is the rank, %p and %h
/// (pid, host) match anything, %% is a percent sign; glob's own special characters are escaped.
std::string rank_pattern(const std::string& tmpl, size_t rank) {
    std::string out;
    for (size_t i = 0; i < tmpl.size(); ++i) {
        char c = tmpl[i];
        if (c == '%' && i + 1 < tmpl.size()) {
            char n = tmpl[++i];
            if (n == 'r') {
                out += std::to_string(rank);
            } else if (n == 'p' || n == 'h') {
                out += "*";
            } else if (n == '%') {
                out += "%";
            } else {
                throw UsageError(std::string("bad template '") + tmpl + "': unknown '%" + n +
                                     "' (known: %r rank, %p pid, %h host, %% percent)",
                                 "merge");
            }
        } else if (c == '*' || c == '?' || c == '[' || c == '\\') {
            out += '\\';
            out += c;
        } else {
            out += c;
        }
    }
    return out;
}

std::vector<std::string> glob_files(const std::string& pattern) {
    glob_t g{};
    std::vector<std::string> out;
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    return out;
}

/// (rank, file) pairs of a template: ranks 0, 1, ... while some file matches.
std::vector<std::pair<size_t, std::string>> template_files(const std::string& tmpl) {
    if (tmpl.find("%r") == std::string::npos) {
        throw UsageError("bad template '" + tmpl + "': it needs %r (the rank)", "merge");
    }
    std::vector<std::pair<size_t, std::string>> out;
    for (size_t rank = 0; rank < 100000; ++rank) {
        std::vector<std::string> files = glob_files(rank_pattern(tmpl, rank));
        if (files.empty()) break;
        for (std::string& f : files) out.emplace_back(rank, std::move(f));
    }
    if (out.empty()) {
        throw report::ReportError("no report matches template '" + tmpl + "' for rank 0 (looked for '" +
                                  rank_pattern(tmpl, 0) + "')");
    }
    return out;
}

/// What merge needs of a report's header to group a directory's reports by run.
struct HeaderInfo {
    std::string path;
    std::string run_id;
    uint64_t rank = 0;
    uint64_t t0 = 0;  // t0_unix_ns: when the process started recording
    uint64_t pid = 0;
};

/// The header of the report at `path` (its first line and the I records that follow), or nullopt
/// when the file is not a memguard report. Reads at most 64 KiB: the header is written at once,
/// when the report is created.
std::optional<HeaderInfo> read_header(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    std::string text;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        text.resize(65536);
        ssize_t n;
        do {
            n = ::read(fd, text.data(), text.size());
        } while (n < 0 && errno == EINTR);
        text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    }
    ::close(fd);
    if (text.rfind("MEMGUARD-REPORT ", 0) != 0) return std::nullopt;
    HeaderInfo h;
    h.path = path;
    size_t i = text.find('\n');
    while (i != std::string::npos && i + 1 < text.size()) {
        size_t end = text.find('\n', i + 1);
        if (end == std::string::npos) break;
        std::string_view line(text.data() + i + 1, end - i - 1);
        i = end;
        if (line.rfind("I ", 0) != 0) break;
        size_t sp = line.find(' ', 2);
        if (sp == std::string_view::npos) continue;
        std::string_view key = line.substr(2, sp - 2);
        std::optional<std::string> value = format::decode(line.substr(sp + 1));
        if (!value) continue;
        if (key == "run_id") h.run_id = *value;
        if (key == "rank") h.rank = text::parse_dec(*value).value_or(0);
        if (key == "t0_unix_ns") h.t0 = text::parse_dec(*value).value_or(0);
        if (key == "pid") h.pid = text::parse_dec(*value).value_or(0);
    }
    return h;
}

/// The reports of one run in `dir`, by rank: the run `run_id`, or the most recent run (the one
/// whose latest report started last). Reports without a run id are never guessed at.
std::vector<std::pair<size_t, std::string>> run_files(const std::string& dir, std::string& run_id) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) throw report::ReportError("cannot read directory '" + dir + "': " + std::strerror(errno));
    std::vector<HeaderInfo> reports;
    size_t without_id = 0;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::optional<HeaderInfo> h = read_header(dir == "." ? name : dir + "/" + name);
        if (!h) continue;
        if (h->run_id.empty()) {
            ++without_id;
        } else {
            reports.push_back(std::move(*h));
        }
    }
    ::closedir(d);
    if (reports.empty()) {
        if (without_id == 0) throw report::ReportError("no memguard report in '" + dir + "'");
        throw report::ReportError(std::to_string(without_id) + " report" + (without_id == 1 ? "" : "s") + " in '" +
                                  dir +
                                  "' but none with a run id (reports of runs under 'memguard run' or torchrun "
                                  "have one): name the report files, or give --template");
    }
    if (run_id.empty()) {
        std::map<std::string, uint64_t> latest;  // run id -> the latest start among its reports
        for (const HeaderInfo& h : reports) latest[h.run_id] = std::max(latest[h.run_id], h.t0);
        run_id = std::max_element(latest.begin(), latest.end(), [](const auto& a, const auto& b) {
                     return a.second < b.second;
                 })->first;
    }
    std::vector<HeaderInfo> run;
    for (HeaderInfo& h : reports) {
        if (h.run_id == run_id) run.push_back(std::move(h));
    }
    if (run.empty()) throw report::ReportError("no report of run '" + run_id + "' in '" + dir + "'");
    std::sort(run.begin(), run.end(), [](const HeaderInfo& a, const HeaderInfo& b) {
        return std::tie(a.rank, a.t0, a.pid, a.path) < std::tie(b.rank, b.t0, b.pid, b.path);
    });
    std::vector<std::pair<size_t, std::string>> out;
    for (size_t i = 0; i < run.size(); ++i) out.emplace_back(i, run[i].path);
    return out;
}

struct RankRow {
    std::string rank;  // the report's I rank, else its position
    std::string file;
    uint64_t peak = 0;
    int64_t peak_t = 0;
    bool has_peak = false;
    uint64_t live_at_exit = 0;
    uint64_t oom_events = 0;            // E records
    uint64_t allocator_oom_events = 0;  // allocator mode: memguard's allocator's (O records)
    bool tensors = false;               // allocator mode (T records)
    uint64_t tensor_peak = 0;           // then the tensor peak (torch.cuda.max_memory_allocated())
    int64_t gc_freed = 0;
    uint64_t phases = 0;
    bool complete = false;
    std::string top_site;  // at the peak: in allocator mode the tensor blocks' at the tensor peak
    uint64_t top_site_bytes = 0;
};

RankRow load_row(const std::string& path, size_t position, size_t frames) {
    report::Report r = report::load_report(path);
    print_warnings(r.warnings);
    report::Summary s = report::summarize(r);
    RankRow row;
    auto rank = r.info.find("rank");
    row.rank = rank != r.info.end() ? rank->second : std::to_string(position);
    row.file = path;
    row.peak = s.peak_bytes;
    row.has_peak = s.peak_t.has_value();
    row.peak_t = s.peak_t.value_or(0);
    row.live_at_exit = s.live_bytes_at_exit;
    row.oom_events = s.oom_events;
    row.allocator_oom_events = s.tensor_oom_events;
    row.tensors = !r.tensors.empty();
    row.tensor_peak = s.tensor_peak_bytes;
    report::SignedTotal gc_freed;  // the reports' values can be any int64 (report/saturate.h)
    for (int64_t v : s.cuda_bytes_freed) gc_freed.add(v);
    row.gc_freed = gc_freed.value();
    row.phases = r.phases.size();
    row.complete = r.complete;
    PeakSite top = top_site_at_peak(r, frames, &s);
    row.top_site = top.label;
    row.top_site_bytes = top.bytes;
    return row;
}

void print_text(const std::vector<RankRow>& rows, const RankRow& max, const RankRow& sum, const Args& args,
                const std::string& run_id) {
    // In allocator mode a column of the tensor peak (max_memory_allocated) beside the segments' peak.
    const bool tensors = std::any_of(rows.begin(), rows.end(), [](const RankRow& r) { return r.tensors; });
    auto tensor_peak = [tensors](const RankRow& r) {
        if (!tensors) return std::string();
        char cell[32];
        std::snprintf(cell, sizeof cell, " %11s", r.tensors ? human_bytes(r.tensor_peak).c_str() : "-");
        return std::string(cell);
    };
    if (!run_id.empty()) {
        print("run %s: %zu reports in %s\n\n", text::printable(run_id).c_str(), rows.size(),
              text::printable(args.directory).c_str());
    } else {
        print("%zu reports\n\n", rows.size());
    }
    print("%-6s %10s %9s%s %12s %4s %12s  %-20s %s\n", "rank", "peak", "peak s", tensors ? " tensor peak" : "",
          "live at exit", "OOM", "freed by gc", "file", tensors ? "top site at peak*" : "top site at peak");
    for (const RankRow& r : rows) {
        std::string site = r.top_site.empty() ? "-" : human_bytes(r.top_site_bytes) + " " + r.top_site;
        std::string file = r.file + (r.complete ? "" : " (incomplete)");
        print("%-6s %10s %9s%s %12s %4llu %12s  %-20s %s\n", r.rank.c_str(), human_bytes(r.peak).c_str(),
              r.has_peak ? report::seconds_fixed3(r.peak_t).c_str() : "-", tensor_peak(r).c_str(),
              human_bytes(r.live_at_exit).c_str(),
              static_cast<unsigned long long>(report::saturating_add(r.oom_events, r.allocator_oom_events)),
              report::human_bytes_signed(r.gc_freed).c_str(), file.c_str(), site.c_str());
    }
    for (const RankRow* r : {&max, &sum}) {
        print("%-6s %10s %9s%s %12s %4llu %12s\n", r->rank.c_str(), human_bytes(r->peak).c_str(), "",
              tensor_peak(*r).c_str(), human_bytes(r->live_at_exit).c_str(),
              static_cast<unsigned long long>(report::saturating_add(r->oom_events, r->allocator_oom_events)),
              report::human_bytes_signed(r->gc_freed).c_str());
    }
    if (tensors) print("\n* allocator mode: the largest site of the tensor blocks at the tensor peak\n");
}

void json_figures(report::JsonWriter& j, const RankRow& r) {
    j.key("peak_bytes").value(r.peak);
    j.key("live_bytes_at_exit").value(r.live_at_exit);
    j.key("oom_events").value(r.oom_events);
    j.key("allocator_oom_events").value(r.allocator_oom_events);
    j.key("tensor_peak_bytes");
    if (r.tensors) {
        j.value(r.tensor_peak);
    } else {
        j.null();
    }
    j.key("gc_cuda_bytes_freed").value(r.gc_freed);
}

void print_json(const std::vector<RankRow>& rows, const RankRow& max, const RankRow& sum, const std::string& run_id) {
    report::JsonWriter j;
    j.begin_object();
    if (!run_id.empty()) j.key("run_id").value(run_id);  // found by run id in a directory
    j.key("ranks").begin_array();
    for (const RankRow& r : rows) {
        j.begin_object();
        j.key("rank").value(r.rank);
        j.key("file").value(r.file);
        j.key("complete").value(r.complete);
        json_figures(j, r);
        j.key("peak_t");
        if (r.has_peak) {
            j.number(report::seconds_exact(r.peak_t));
        } else {
            j.null();
        }
        j.key("phases").value(r.phases);
        j.key("top_site");
        if (r.top_site.empty()) {
            j.null();
        } else {
            j.begin_object();
            j.key("site").value(r.top_site);
            j.key("bytes").value(r.top_site_bytes);
            // "tensors" in allocator mode: the site of the tensor blocks at the tensor peak, as `top` gives it.
            j.key("bytes_of").value(report::series_name(r.tensors ? report::Series::Tensors : report::Series::Gpu));
            j.end_object();
        }
        j.end_object();
    }
    j.end_array();
    j.key("max").begin_object();
    json_figures(j, max);
    j.end_object();
    j.key("sum").begin_object();
    json_figures(j, sum);
    j.end_object();
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_merge(const Args& args) {
    std::vector<std::pair<size_t, std::string>> files;
    std::string run_id = args.run_id;
    if (!args.directory.empty()) {
        files = run_files(args.directory, run_id);
    } else if (!args.rank_template.empty()) {
        files = template_files(args.rank_template);
    } else {
        for (size_t i = 0; i < args.files.size(); ++i) files.emplace_back(i, args.files[i]);
    }
    std::vector<RankRow> rows;
    for (const auto& [position, file] : files) rows.push_back(load_row(file, position, args.frames));
    RankRow max, sum;
    max.rank = "max";
    sum.rank = "sum";
    // The sums stop at UINT64_MAX (report/saturate.h): a report may give any uint64, and a sum that
    // wrapped would show less than the largest rank.
    report::SignedTotal gc_sum;
    for (const RankRow& r : rows) {
        max.peak = std::max(max.peak, r.peak);
        max.live_at_exit = std::max(max.live_at_exit, r.live_at_exit);
        max.oom_events = std::max(max.oom_events, r.oom_events);
        max.allocator_oom_events = std::max(max.allocator_oom_events, r.allocator_oom_events);
        max.tensors = sum.tensors = max.tensors || r.tensors;
        max.tensor_peak = std::max(max.tensor_peak, r.tensor_peak);
        report::add_to(sum.tensor_peak, r.tensor_peak);
        max.gc_freed = std::max(max.gc_freed, r.gc_freed);
        report::add_to(sum.peak, r.peak);
        report::add_to(sum.live_at_exit, r.live_at_exit);
        report::add_to(sum.oom_events, r.oom_events);
        report::add_to(sum.allocator_oom_events, r.allocator_oom_events);
        gc_sum.add(r.gc_freed);
    }
    sum.gc_freed = gc_sum.value();
    std::cout.flush();
    if (args.json) {
        print_json(rows, max, sum, args.directory.empty() ? "" : run_id);
    } else {
        print_text(rows, max, sum, args, args.directory.empty() ? "" : run_id);
    }
    return kExitOk;
}

}  // namespace memguard::cli

// memguard merge FILES... | --template T [-n N] [--frames K] [--json]: one row per rank of a
// distributed job, plus the maximum and the sum over the ranks, then the outlier ranks
// (rank_outliers.h). Each rank is read from its rank summary when one is there and current
// (rank_summary.h), else from its report; FILES may be summaries themselves.
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
#include "rank_outliers.h"
#include "rank_summary.h"
#include "report/json.h"
#include "report/saturate.h"
#include "report/timeline.h"
#include "report/transcode.h"
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
        for (std::string& f : files) {
            // A report's summary beside it matches a template that does not end the name.
            // So does a bounded report's detail part (read with its report).
            if (!is_summary_path(f) && !report::is_detail_part(f)) out.emplace_back(rank, std::move(f));
        }
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
    std::optional<std::map<std::string, std::string>> info = report::header_info(text);
    if (!info) return std::nullopt;
    HeaderInfo h;
    h.path = path;
    auto value = [&info](const char* key) {
        auto it = info->find(key);
        return it == info->end() ? std::string() : it->second;
    };
    h.run_id = value("run_id");
    h.rank = text::parse_dec(value("rank")).value_or(0);
    h.t0 = text::parse_dec(value("t0_unix_ns")).value_or(0);
    h.pid = text::parse_dec(value("pid")).value_or(0);
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
        if (name == "." || name == ".." || report::is_detail_part(name)) continue;
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
    uint64_t ooms = 0;                  // out-of-memory events as `memguard oom` counts them (PyTorch's too)
    /// The OOM column: the larger of the events `memguard oom` explains and the failed allocations
    /// (a PyTorch OOM under a memory fraction fails no CUDA call; one cudaMalloc failure may be retried).
    uint64_t oom_column() const { return std::max(ooms, report::saturating_add(oom_events, allocator_oom_events)); }
    bool tensors = false;      // allocator mode (T records)
    uint64_t tensor_peak = 0;  // then the tensor peak (torch.cuda.max_memory_allocated())
    int64_t gc_freed = 0;
    uint64_t phases = 0;
    bool complete = false;
    bool from_summary = false;  // read from a rank summary, not the report
    std::string top_site;       // at the peak: in allocator mode the tensor blocks' at the tensor peak
    uint64_t top_site_bytes = 0;
};

/// A rank's summary: the file itself when it is one (FILE.summary.json); else the summary beside the
/// report when it is current and made with the frames asked for (merge's default); else the report's.
RankSummary load_summary(const std::string& path, size_t frames, bool* from_summary) {
    *from_summary = true;
    if (is_summary_path(path)) return read_rank_summary(path);
    if (frames == kSummaryFrames) {
        if (auto s = current_summary_beside(path)) return std::move(*s);
    }
    *from_summary = false;
    return summarize_report(path, frames);
}

RankRow make_row(const RankSummary& s, const std::string& path, size_t position) {
    RankRow row;
    row.rank = s.rank ? std::to_string(*s.rank) : std::to_string(position);
    row.file = path;
    row.peak = s.gpu.peak_bytes;
    row.has_peak = s.gpu.peak_time_ns.has_value();
    row.peak_t = s.gpu.peak_time_ns.value_or(0);
    row.live_at_exit = s.gpu.live_bytes_at_exit;
    row.oom_events = s.cuda_oom_errors;
    row.allocator_oom_events = s.allocator_ooms;
    row.ooms = s.ooms;
    row.tensors = s.bytes_of == "tensors";
    row.tensor_peak = s.tensors ? s.tensors->peak_bytes : 0;
    row.gc_freed = s.collections_freed();
    row.phases = s.phases;
    row.complete = s.complete;
    if (!s.sites.empty()) {
        row.top_site = s.sites.front().label;
        row.top_site_bytes = s.sites.front().bytes;
    }
    return row;
}

/// Divergences shown per outlier rank in the text (JSON lists them all).
constexpr size_t kDivergencesShown = 4;

void print_outliers(const std::vector<RankRow>& rows, const OutlierFinding& f) {
    if (!f.compared) return;
    if (f.pair && f.ranks.empty()) {
        print("\nno heavier rank (2 ranks; peak, categories and sites at the peak against the other rank: %s)\n",
              plural(f.figures, "figure", "figures").c_str());
        return;
    }
    if (f.ranks.empty()) {
        print("\nno outlier rank (%zu ranks; peak, categories and sites at the peak against their medians: %s)\n",
              rows.size(), plural(f.figures, "figure", "figures").c_str());
        return;
    }
    if (f.pair) {
        print("\nthe heavier of 2 ranks (peak, categories and sites at the peak against the other rank, where they "
              "differ by more than 256 MiB and 20%%):\n");
    } else {
        print("\n%s of %zu (peak, categories and sites at the peak against their medians over the ranks):\n",
              plural(f.ranks.size(), "outlier rank", "outlier ranks").c_str(), rows.size());
    }
    for (const OutlierRank& o : f.ranks) {
        std::string text;
        for (size_t i = 0; i < o.divergences.size() && i < kDivergencesShown; ++i) {
            text += (i == 0 ? "" : "; ") + divergence_text(o.divergences[i]);
        }
        if (o.divergences.size() > kDivergencesShown) {
            text += "; and " + plural(o.divergences.size() - kDivergencesShown, "more figure", "more figures");
        }
        print("  rank %s: %s\n", rows[o.index].rank.c_str(), text.c_str());
    }
}

void print_text(const std::vector<RankRow>& rows, const RankRow& max, const RankRow& sum, const Args& args,
                const std::string& run_id, const OutlierFinding& outliers) {
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
              human_bytes(r.live_at_exit).c_str(), static_cast<unsigned long long>(r.oom_column()),
              report::human_bytes_signed(r.gc_freed).c_str(), file.c_str(), site.c_str());
    }
    for (const RankRow* r : {&max, &sum}) {
        print("%-6s %10s %9s%s %12s %4llu %12s\n", r->rank.c_str(), human_bytes(r->peak).c_str(), "",
              tensor_peak(*r).c_str(), human_bytes(r->live_at_exit).c_str(),
              static_cast<unsigned long long>(r->oom_column()), report::human_bytes_signed(r->gc_freed).c_str());
    }
    if (tensors) print("\n* allocator mode: the largest site of the tensor blocks at the tensor peak\n");
    print_outliers(rows, outliers);
}

void json_figures(report::JsonWriter& j, const RankRow& r) {
    j.key("peak_bytes").value(r.peak);
    j.key("live_bytes_at_exit").value(r.live_at_exit);
    j.key("oom_events").value(r.oom_events);
    j.key("allocator_oom_events").value(r.allocator_oom_events);
    j.key("ooms").value(r.ooms);
    j.key("tensor_peak_bytes");
    if (r.tensors) {
        j.value(r.tensor_peak);
    } else {
        j.null();
    }
    j.key("gc_cuda_bytes_freed").value(r.gc_freed);
}

void json_outliers(report::JsonWriter& j, const std::vector<RankRow>& rows, const OutlierFinding& f) {
    j.key("outliers");
    if (!f.compared) {
        j.null();
        return;
    }
    const report::OutlierRule rule;
    j.begin_object();
    j.key("ranks_compared").value(static_cast<uint64_t>(rows.size()));
    // Two ranks: the heavier against the other (median_bytes: the other rank's value).
    j.key("pair").value(f.pair);
    j.key("figures").value(static_cast<uint64_t>(f.figures));
    auto decimal = [](double v) {  // the rule's own finite constants: valid JSON numbers
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return std::string(buf);
    };
    j.key("rule").begin_object();
    j.key("k").number(decimal(rule.k));
    j.key("min_bytes").value(rule.min_bytes);
    j.key("min_share").number(decimal(rule.min_share));
    j.end_object();
    j.key("ranks").begin_array();
    for (const OutlierRank& o : f.ranks) {
        j.begin_object();
        j.key("rank").value(rows[o.index].rank);
        j.key("file").value(rows[o.index].file);
        j.key("figures").begin_array();
        for (const Divergence& d : o.divergences) {
            j.begin_object();
            j.key("figure").value(divergence_kind(d.what));
            j.key("name").value(d.name);
            j.key("bytes").value(d.bytes);
            j.key("median_bytes").value(d.stats.median);
            j.key("mad_bytes").value(d.stats.mad);
            j.key("threshold_bytes").value(d.stats.threshold);
            j.key("text").value(divergence_text(d));
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_array();
    j.end_object();
}

void print_json(const std::vector<RankRow>& rows, const RankRow& max, const RankRow& sum, const std::string& run_id,
                const OutlierFinding& outliers) {
    report::JsonWriter j;
    j.begin_object();
    if (!run_id.empty()) j.key("run_id").value(run_id);  // found by run id in a directory
    j.key("ranks").begin_array();
    for (const RankRow& r : rows) {
        j.begin_object();
        j.key("rank").value(r.rank);
        j.key("file").value(r.file);
        j.key("complete").value(r.complete);
        j.key("from_summary").value(r.from_summary);
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
    json_outliers(j, rows, outliers);
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
    std::vector<RankSummary> summaries;
    std::vector<RankRow> rows;
    for (const auto& [position, file] : files) {
        bool from_summary = false;
        summaries.push_back(load_summary(file, args.frames, &from_summary));
        rows.push_back(make_row(summaries.back(), file, position));
        rows.back().from_summary = from_summary;
    }
    const OutlierFinding outliers = find_outlier_ranks(summaries);
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
        max.ooms = std::max(max.ooms, r.ooms);
        max.tensors = sum.tensors = max.tensors || r.tensors;
        max.tensor_peak = std::max(max.tensor_peak, r.tensor_peak);
        report::add_to(sum.tensor_peak, r.tensor_peak);
        max.gc_freed = std::max(max.gc_freed, r.gc_freed);
        report::add_to(sum.peak, r.peak);
        report::add_to(sum.live_at_exit, r.live_at_exit);
        report::add_to(sum.oom_events, r.oom_events);
        report::add_to(sum.allocator_oom_events, r.allocator_oom_events);
        report::add_to(sum.ooms, r.ooms);
        gc_sum.add(r.gc_freed);
    }
    sum.gc_freed = gc_sum.value();
    std::cout.flush();
    if (args.json) {
        print_json(rows, max, sum, args.directory.empty() ? "" : run_id, outliers);
    } else {
        print_text(rows, max, sum, args, args.directory.empty() ? "" : run_id, outliers);
    }
    return kExitOk;
}

}  // namespace memguard::cli

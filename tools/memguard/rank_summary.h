// The per-rank summary (docs/rank-summary.md): a small JSON file beside each report,
// `<report>.summary.json`, with what a fleet of ranks is compared by: the process, the peak and when,
// the categories and the largest sites at the peak, OOMs, collections, hazards and steps. At most
// kRankSummaryMaxBytes whatever the run's length. `memguard run` writes one for every report of the
// run, `memguard summarize FILE...` for any report; `memguard merge` reads them instead of the
// reports when they are there and current, and `export --jsonl` carries the same object.
//
// Every figure comes from the analyses the other commands use (report::summarize, site_table_at_peak
// and site_label, breakdown_at, find_ooms, step_rows and find_growth), so the summary says what
// `summary`, `top`, `oom`, `cycles` and `steps` say of the same report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/json.h"
#include "report/report.h"

namespace memguard::cli {

constexpr const char* kRankSummarySchema = "memguard.rank_summary";
constexpr int kRankSummaryVersion = 1;
constexpr size_t kRankSummaryMaxBytes = 64 * 1024;
constexpr size_t kSummarySites = 12;       // the largest sites at the peak kept
constexpr size_t kSummaryFrames = 6;       // frames of each kind per site (merge's default --frames)
constexpr size_t kSummaryOomEvents = 16;   // OOM events listed (all are counted)
constexpr size_t kSummaryCategories = 32;  // categories at the peak listed (largest first)
constexpr size_t kSummaryTextBytes = 256;  // a string from the report takes at most this in the JSON

struct SummarySite {
    std::string label;                // site_label: how every command names the site
    std::string user_line;            // the user's own line, "" when unknown
    std::vector<std::string> frames;  // site_key's lines: Python frames, then native (module function)
    uint64_t bytes = 0, blocks = 0;
    /// What sites of different ranks are matched by: the frames, else the label.
    std::string key() const;
};

struct SummaryCategory {
    std::string name;  // report::part_name: "nccl", "library (libfoo.so)"
    uint64_t bytes = 0, estimated_bytes = 0;
};

struct SummaryOom {
    int64_t time_ns = 0;
    int device = 0;
    uint64_t request_bytes = 0;
    std::string source;  // torch, cuda, allocator
    bool recovered = false;
};

struct SummaryTrigger {
    std::string name;  // the format's trigger name
    uint64_t count = 0;
    int64_t cuda_bytes_freed = 0;
};

struct SummaryGrowth {
    uint32_t first_step = 0, last_step = 0;
    uint64_t from_bytes = 0, to_bytes = 0, per_step_bytes = 0;
};

struct SummarySteps {
    uint64_t count = 0;
    std::string bytes_of;  // "tensors" or "gpu", as `steps` counts them
    int64_t median_duration_ns = 0, max_duration_ns = 0;
    uint64_t max_peak_bytes = 0, median_incremental_peak_bytes = 0, last_exit_bytes = 0;
    std::optional<SummaryGrowth> growth;
};

/// Peak, time and live-at-exit bytes of one series.
struct SummaryLevel {
    uint64_t peak_bytes = 0;
    std::optional<int64_t> peak_time_ns;
    uint64_t live_bytes_at_exit = 0;
};

struct RankSummary {
    std::string report;         // the report's path as it was given
    uint64_t report_bytes = 0;  // its size then: a summary beside a report of another size is stale
    bool complete = false;
    uint64_t lost_records = 0;
    std::string run_id, host, exe;  // "" when the header does not say
    std::optional<int64_t> rank, pid;
    std::optional<int64_t> t0_unix_ns;
    std::vector<int> devices;  // the GPUs it allocated on
    int64_t duration_ns = 0;
    bool allocator_mode = false;
    std::string bytes_of = "gpu";  // "tensors" in allocator mode (the tensor blocks), else "gpu"
    SummaryLevel gpu;
    std::optional<SummaryLevel> tensors;  // allocator mode
    bool has_categories = false;          // false: nothing was live, no peak
    std::vector<SummaryCategory> categories;
    uint64_t site_count = 0;  // sites live at the peak (all of them; `sites` keeps the largest)
    std::vector<SummarySite> sites;
    bool sites_cut = false;                            // sites left out to stay under kRankSummaryMaxBytes
    uint64_t ooms = 0, recovered = 0;                  // as `memguard oom` counts them
    uint64_t cuda_oom_errors = 0, allocator_ooms = 0;  // E records with an OOM error; O records
    std::vector<SummaryOom> oom_events;                // the first kSummaryOomEvents
    std::vector<SummaryTrigger> collections;           // every trigger
    uint64_t unsafe_calls = 0, frees_while_graph_alive = 0, warmup_retention = 0;
    uint64_t phases = 0, compiles = 0;
    std::optional<SummarySteps> steps;

    /// The peak of bytes_of.
    const SummaryLevel& peak() const { return tensors && bytes_of == "tensors" ? *tensors : gpu; }
    /// CUDA bytes freed by every collection (saturating at the int64 range).
    int64_t collections_freed() const;
};

/// The summary of a loaded report; `frames`: frames of each kind per site.
RankSummary make_rank_summary(const report::Report& r, size_t frames = kSummaryFrames);
/// The summary of the report at `path`, read through the streaming reader (one pass, two for a
/// peak that kept coming back) where it answers as load_report would, else read whole; its
/// warnings printed. Equal to make_rank_summary(load_report(path), frames).
RankSummary summarize_report(const std::string& path, size_t frames = kSummaryFrames);

/// Writes `text`, or null when it is empty (the summary's "the report does not say").
void json_text_or_null(report::JsonWriter& j, const std::string& text);

/// The summary's members into an object the caller has begun (export --jsonl nests it).
void rank_summary_members(report::JsonWriter& j, const RankSummary& s);
/// The summary file's text: at most kRankSummaryMaxBytes (the smallest sites are left out, and
/// `sites_cut` said, when it would be more).
std::string rank_summary_json(RankSummary s);

/// Parses a summary file's text; `name` stands for the file in messages. Throws report::ReportError
/// naming the file and the field for anything that is not a summary of a schema version this
/// reader knows.
RankSummary parse_rank_summary(std::string_view text, const std::string& name);

/// `<report>.summary.json`.
std::string summary_path_of(const std::string& report_path);
/// Whether `path` names a summary file (ends in .summary.json).
bool is_summary_path(const std::string& path);

/// Reads a summary file (a regular file of at most 1 MiB). Throws report::ReportError.
RankSummary read_rank_summary(const std::string& path);
/// The summary beside a report when there is one and it is current (made of a report of the
/// report's present size); nullopt otherwise. A summary that cannot be read is a warning.
std::optional<RankSummary> current_summary_beside(const std::string& report_path);

/// Loads the report, summarizes it and writes the summary beside it; returns the summary's path.
/// Throws report::ReportError.
std::string write_rank_summary(const std::string& report_path);

}  // namespace memguard::cli

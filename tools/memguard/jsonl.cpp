// export --jsonl: a report as JSON lines for a query engine (DuckDB, Spark, a warehouse), one
// object per line: the rank summary, every site at the peak, every phase, every step
// (docs/fleet-export.md is the schema). Every line carries the columns that tell the ranks of a
// fleet apart (run_id, rank, host, pid, report), so that the exports of many reports can be read as
// one table.
#include <string>
#include <vector>

#include "cli.h"
#include "export.h"
#include "rank_summary.h"
#include "report/json.h"
#include "report/steps.h"
#include "report/timeline.h"
#include "sites.h"

namespace memguard::cli {

namespace {

constexpr int kFleetSchemaVersion = 1;

/// The columns every line starts with.
class Lines {
public:
    explicit Lines(const RankSummary& s) : s_(s) {}

    report::JsonWriter& begin(const char* record) {
        j_ = report::JsonWriter(true);
        j_.begin_object();
        j_.key("record").value(record);
        j_.key("schema_version").value(kFleetSchemaVersion);
        json_text_or_null(j_.key("run_id"), s_.run_id);
        j_.key("rank").value_or_null(s_.rank);
        json_text_or_null(j_.key("host"), s_.host);
        j_.key("pid").value_or_null(s_.pid);
        j_.key("report").value(s_.report);
        return j_;
    }
    void end() {
        j_.end_object();
        out_ += j_.str();
    }
    std::string take() { return std::move(out_); }

private:
    const RankSummary& s_;
    report::JsonWriter j_{true};
    std::string out_;
};

void site_lines(Lines& lines, const report::Report& r, const RankSummary& s, size_t frames) {
    const bool tensors = s.bytes_of == "tensors";
    const report::SiteTable table = site_table_at_peak(r, tensors);
    SiteSymbolizer sym(r, frames);
    std::vector<size_t> handles;
    for (const report::Site& site : table.sites) handles.push_back(sym.add(site.stack_id, site.python_stack_id));
    sym.resolve();
    for (size_t i = 0; i < table.sites.size(); ++i) {
        const report::Site& site = table.sites[i];
        const SiteFrames& f = sym.get(handles[i]);
        report::JsonWriter& j = lines.begin("site");
        j.key("bytes_of").value(s.bytes_of);
        j.key("position").value(static_cast<uint64_t>(i));
        j.key("label").value(site_label(f, r));
        json_text_or_null(j.key("user_line"), site_user_line(f, r));
        const std::string key = site_key(f, r);
        j.key("key").value(key);
        j.key("frames").begin_array();
        for (size_t at = 0; at < key.size();) {
            size_t end = key.find('\n', at);
            if (end == std::string::npos) end = key.size();
            if (end > at) j.value(key.substr(at, end - at));
            at = end + 1;
        }
        j.end_array();
        j.key("kind").value(site.physical ? "physical" : "blocks");
        j.key("bytes").value(site.bytes);
        j.key("blocks").value(site.blocks);
        j.key("stack_id").value(site.stack_id);
        j.key("python_stack_id").value(site.python_stack_id);
        lines.end();
    }
}

void phase_and_step_lines(Lines& lines, const report::Report& r, const RankSummary& s) {
    if (r.phases.empty() && r.steps.empty()) return;
    const report::Series series = s.bytes_of == "tensors" ? report::Series::Tensors : report::Series::Gpu;
    const report::Timeline tl = report::build_timeline(r);
    for (const report::PhaseStats& p : report::phase_stats(r, tl, series)) {
        const report::Phase& ph = r.phases[p.index];
        report::JsonWriter& j = lines.begin("phase");
        j.key("bytes_of").value(report::series_name(series));
        j.key("name").value(ph.name);
        j.key("occurrence").value(p.occurrence);
        j.key("depth").value(p.depth);
        j.key("source").value(format::phase_source_name(ph.source));
        j.key("tid").value(ph.tid);
        j.key("t_begin_ns").value(ph.t_begin);
        j.key("t_end_ns").value(p.t_end);
        j.key("ended").value(ph.t_end.has_value());
        j.key("entry_bytes").value(p.entry_bytes);
        j.key("peak_bytes").value(p.peak_bytes);
        j.key("peak_time_ns").value(p.peak_t);
        j.key("incremental_peak_bytes").value(p.incremental_peak());
        j.key("exit_bytes").value(p.exit_bytes);
        lines.end();
    }
    for (const report::StepRow& row : report::step_rows(r, tl, series)) {
        report::JsonWriter& j = lines.begin("step");
        j.key("bytes_of").value(report::series_name(series));
        j.key("step").value(r.steps[row.index].index);
        j.key("t_begin_ns").value(row.t_begin);
        j.key("t_end_ns").value(row.t_end);
        j.key("duration_ns").value(row.t_end - row.t_begin);
        j.key("entry_bytes").value(row.entry_bytes);
        j.key("peak_bytes").value(row.peak_bytes);
        j.key("peak_time_ns").value(row.peak_t);
        j.key("incremental_peak_bytes").value(row.incremental_peak());
        j.key("exit_bytes").value(row.exit_bytes);
        lines.end();
    }
}

}  // namespace

std::string jsonl_export(const report::Report& r, size_t frames) {
    const RankSummary s = make_rank_summary(r);
    Lines lines(s);
    report::JsonWriter& j = lines.begin("summary");
    j.key("summary").begin_object();
    rank_summary_members(j, s);
    j.end_object();
    lines.end();
    site_lines(lines, r, s, frames);
    phase_and_step_lines(lines, r, s);
    return lines.take();
}

}  // namespace memguard::cli

#include "rank_summary.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "common/text.h"
#include "output.h"
#include "report/analysis.h"
#include "report/categories.h"
#include "report/oom.h"
#include "report/saturate.h"
#include "report/steps.h"
#include "report/stream.h"
#include "report/stream_oom.h"
#include "report/stream_steps.h"
#include "report/timeline.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

constexpr report::GcTrigger kTriggers[] = {report::GcTrigger::Automatic, report::GcTrigger::Explicit,
                                           report::GcTrigger::Memguard, report::GcTrigger::Recompute,
                                           report::GcTrigger::Step};
constexpr uint64_t kMaxSummaryFile = 1 << 20;

/// `s` cut so that it takes at most kSummaryTextBytes in the JSON text (escapes counted: a control
/// character takes 6 bytes there), at a character boundary, with "..." where it was cut.
std::string cut(const std::string& s) {
    if (s.size() <= kSummaryTextBytes / 6) return s;  // fits however it is escaped
    size_t json_bytes = 0, end = 0;
    std::string escaped;
    while (end < s.size()) {
        size_t len = 1;  // the UTF-8 sequence's length by its first byte (JsonWriter checks the rest)
        const auto c = static_cast<unsigned char>(s[end]);
        if (c >= 0xF0) {
            len = 4;
        } else if (c >= 0xE0) {
            len = 3;
        } else if (c >= 0xC0) {
            len = 2;
        }
        len = std::min(len, s.size() - end);
        escaped.clear();
        report::JsonWriter::escape(std::string_view(s).substr(end, len), escaped);
        if (json_bytes + escaped.size() - 2 > kSummaryTextBytes - 3) break;
        json_bytes += escaped.size() - 2;
        end += len;
    }
    return end == s.size() ? s : s.substr(0, end) + "...";
}

std::string info(const report::Report& r, const char* key) {
    auto it = r.info.find(key);
    if (it == r.info.end() || it->second == "-") return "";
    return cut(it->second);
}

std::optional<int64_t> info_int(const report::Report& r, const char* key) {
    auto it = r.info.find(key);
    return it == r.info.end() ? std::nullopt : text::parse_sdec(it->second);
}

uint64_t file_size(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

template <class T>
T median_copy(std::vector<T> v) {
    if (v.empty()) return T{};
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    return v[mid];  // the upper median: a value some step had
}

/// The sites of `table` (the live set at the peak).
void add_sites(RankSummary& out, const report::Report& r, const report::SiteTable& table, size_t frames) {
    out.site_count = table.sites.size();
    SiteSymbolizer sym(r, frames);
    std::vector<size_t> handles;
    for (size_t i = 0; i < table.sites.size() && i < kSummarySites; ++i) {
        handles.push_back(sym.add(table.sites[i].stack_id, table.sites[i].python_stack_id));
    }
    sym.resolve();
    for (size_t i = 0; i < handles.size(); ++i) {
        const SiteFrames& f = sym.get(handles[i]);
        SummarySite site;
        site.label = cut(site_label(f, r));
        site.user_line = cut(site_user_line(f, r));
        std::string key = site_key(f, r);
        size_t at = 0;
        while (at < key.size()) {
            size_t end = key.find('\n', at);
            if (end == std::string::npos) end = key.size();
            if (end > at) site.frames.push_back(cut(key.substr(at, end - at)));
            at = end + 1;
        }
        site.bytes = table.sites[i].bytes;
        site.blocks = table.sites[i].blocks;
        out.sites.push_back(std::move(site));
    }
}

report::BreakdownOptions category_options() {
    report::BreakdownOptions o;
    o.max_sites = 0;
    o.symbolizer = symbolizer_options();  // the same rules as `summary` and `top --by category`
    return o;
}

void add_categories(RankSummary& out, const report::Breakdown& b) {
    out.has_categories = true;
    for (const report::CategoryPart& p : b.parts) {
        if (out.categories.size() == kSummaryCategories) break;
        out.categories.push_back({cut(report::part_name(p)), p.bytes, p.estimated_bytes});
    }
}

void add_ooms(RankSummary& out, const std::vector<report::OomEvent>& ooms, const report::Summary& s) {
    for (const report::OomEvent& e : ooms) {
        ++(e.recovered ? out.recovered : out.ooms);
        if (out.oom_events.size() < kSummaryOomEvents) {
            out.oom_events.push_back({e.t, e.device, e.request(), std::string(format::name_of(e.source)), e.recovered});
        }
    }
    out.cuda_oom_errors = s.oom_events;
    out.allocator_ooms = s.tensor_oom_events;
}

/// The figures of `memguard steps` (its rows and growth finding), in the same series.
/// `rows`: step_rows in `series`, as the report read whole or StepRowsObserver gives them.
void add_steps(RankSummary& out, const report::Report& r, report::Series series,
               const std::vector<report::StepRow>& rows) {
    if (r.steps.empty()) return;
    SummarySteps st;
    st.count = rows.size();
    st.bytes_of = report::series_name(series);
    std::vector<int64_t> durations;
    std::vector<uint64_t> increments, ends;
    for (const report::StepRow& row : rows) {
        durations.push_back(row.t_end - row.t_begin);
        increments.push_back(row.incremental_peak());
        ends.push_back(row.exit_bytes);
        st.max_peak_bytes = std::max(st.max_peak_bytes, row.peak_bytes);
        st.max_duration_ns = std::max(st.max_duration_ns, row.t_end - row.t_begin);
    }
    st.median_duration_ns = median_copy(durations);
    st.median_incremental_peak_bytes = median_copy(increments);
    st.last_exit_bytes = ends.empty() ? 0 : ends.back();
    if (auto g = report::find_growth(ends)) {
        SummaryGrowth growth;
        growth.first_step = r.steps[rows[g->first].index].index;
        growth.last_step = r.steps[rows[g->last].index].index;
        growth.from_bytes = g->from_bytes;
        growth.to_bytes = g->to_bytes;
        growth.per_step_bytes = static_cast<uint64_t>(std::min(std::floor(std::max(g->per_step, 0.0)), 1.8e19));
        st.growth = growth;
    }
    out.steps = st;
}

// --- reading: every field checked, the problem named ---------------------------------------------

using nlohmann::json;

class Reader {
public:
    explicit Reader(std::string name) : name_(std::move(name)) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw report::ReportError(name_ + ": field '" + field + "': " + what);
    }
    const json& member(const json& obj, const std::string& path, const char* key) const {
        if (!obj.is_object()) fail(path, "expected an object");
        auto it = obj.find(key);
        if (it == obj.end()) fail(join(path, key), "missing");
        return *it;
    }
    const json& object(const json& obj, const std::string& path, const char* key) const {
        const json& v = member(obj, path, key);
        if (!v.is_object()) fail(join(path, key), "expected an object");
        return v;
    }
    const json& array(const json& obj, const std::string& path, const char* key) const {
        const json& v = member(obj, path, key);
        if (!v.is_array()) fail(join(path, key), "expected an array");
        return v;
    }
    bool nullish(const json& obj, const std::string& path, const char* key) const {
        return member(obj, path, key).is_null();
    }
    uint64_t u64(const json& obj, const std::string& path, const char* key) const {
        const json& v = member(obj, path, key);
        if (!v.is_number_unsigned()) fail(join(path, key), "expected a whole number >= 0");
        return v.get<uint64_t>();
    }
    int64_t i64(const json& obj, const std::string& path, const char* key) const {
        const json& v = member(obj, path, key);
        if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
        if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return v.get<int64_t>();
        fail(join(path, key), "expected a whole number in the int64 range");
    }
    std::optional<int64_t> opt_i64(const json& obj, const std::string& path, const char* key) const {
        return nullish(obj, path, key) ? std::nullopt : std::optional<int64_t>(i64(obj, path, key));
    }
    bool boolean(const json& obj, const std::string& path, const char* key) const {
        const json& v = member(obj, path, key);
        if (!v.is_boolean()) fail(join(path, key), "expected true or false");
        return v.get<bool>();
    }
    std::string str(const json& obj, const std::string& path, const char* key) const {
        const json& v = member(obj, path, key);
        if (!v.is_string()) fail(join(path, key), "expected a string");
        return v.get<std::string>();
    }
    std::string opt_str(const json& obj, const std::string& path, const char* key) const {
        return nullish(obj, path, key) ? std::string() : str(obj, path, key);
    }
    static std::string join(const std::string& path, const std::string& key) {
        return path.empty() ? key : path + "." + key;
    }
    static std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

private:
    std::string name_;
};

SummaryLevel read_level(const Reader& rd, const json& v, const std::string& path) {
    SummaryLevel l;
    l.peak_bytes = rd.u64(v, path, "peak_bytes");
    l.peak_time_ns = rd.opt_i64(v, path, "peak_time_ns");
    l.live_bytes_at_exit = rd.u64(v, path, "live_bytes_at_exit");
    return l;
}

void write_level(report::JsonWriter& j, const SummaryLevel& l) {
    j.begin_object();
    j.key("peak_bytes").value(l.peak_bytes);
    j.key("peak_time_ns").value_or_null(l.peak_time_ns);
    j.key("live_bytes_at_exit").value(l.live_bytes_at_exit);
    j.end_object();
}

std::string read_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw report::ReportError("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw report::ReportError("'" + path + "' is not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxSummaryFile) {
        ::close(fd);
        throw report::ReportError("'" + path + "' is not a rank summary: " + std::to_string(st.st_size) +
                                  " bytes, more than a summary's 1 MiB at most");
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < text.size()) {
        ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    ::close(fd);
    text.resize(got);
    return text;
}

}  // namespace

std::string SummarySite::key() const {
    if (frames.empty()) return label;
    std::string k;
    for (const std::string& f : frames) k += f + "\n";
    return k;
}

int64_t RankSummary::collections_freed() const {
    report::SignedTotal total;
    for (const SummaryTrigger& t : collections) total.add(t.cuda_bytes_freed);
    return total.value();
}

namespace {

/// What the summary reads at the peak and of the steps, from the report read whole or streamed.
struct PeakAndSteps {
    std::optional<report::Breakdown> categories;  // at the peak of bytes_of, when there is one
    report::SiteTable sites;                      // the live set at that peak, by site
    std::vector<report::StepRow> rows;            // step_rows in the series of bytes_of
    std::vector<report::OomEvent> ooms;           // find_ooms
};

RankSummary make_from(const report::Report& r, const report::Summary& s, const PeakAndSteps& at, size_t frames) {
    RankSummary out;
    out.report = r.path;
    out.report_bytes = file_size(r.path);
    out.complete = s.complete;
    out.lost_records = r.lost_records;
    out.run_id = info(r, "run_id");
    out.host = info(r, "host");
    out.exe = info(r, "exe");
    out.rank = info_int(r, "rank");
    out.pid = info_int(r, "pid");
    out.t0_unix_ns = info_int(r, "t0_unix_ns");
    for (const auto& [dev, d] : s.by_device) out.devices.push_back(dev);
    out.duration_ns = s.duration_ns;
    out.allocator_mode = allocator_mode(r);
    out.gpu = {s.peak_bytes, s.peak_t, s.live_bytes_at_exit};
    // The tensor view where the report has tensor blocks, as `top`, `merge` and `steps` take it.
    const bool tensors = r.has_tensors();
    if (out.allocator_mode)
        out.tensors = SummaryLevel{s.tensor_peak_bytes, s.tensor_peak_t, s.tensor_live_bytes_at_exit};
    out.bytes_of = tensors ? "tensors" : "gpu";
    if (at.categories) add_categories(out, *at.categories);
    add_sites(out, r, at.sites, frames);
    add_ooms(out, at.ooms, s);
    for (report::GcTrigger t : kTriggers) {
        const size_t i = static_cast<size_t>(t);
        out.collections.push_back({report::trigger_name(t), s.collections[i], s.cuda_bytes_freed[i]});
    }
    out.unsafe_calls = s.unsafe_calls;
    out.frees_while_graph_alive = s.frees_while_graph_alive;
    out.warmup_retention = s.warmup_retention;
    out.phases = r.phases.size();
    out.compiles = s.compiles;
    add_steps(out, r, tensors ? report::Series::Tensors : report::Series::Gpu, at.rows);
    return out;
}

/// The summary through the streaming reader (report/stream.h): the figures, the live set at the
/// peak, the step rows, the OOMs (OomObserver, counts only) and the tensor tags in one pass (a second
/// for a peak that kept coming back); the categories at the peak on the report of the point. Nothing
/// where load_report must answer: site labels that need backward_sites, OOMs that OomObserver could
/// not match (a report written out of time order), a pipe that could not be spooled.
std::optional<RankSummary> stream_rank_summary(ReportInput& in, size_t frames) {
    report::SummaryBuilder builder;
    report::PeakObserver peaks;
    report::StepRowsObserver rows;
    report::TensorTagObserver tags;
    report::OomObserver failures(false);
    report::Observers all({&builder, &peaks, &rows, &tags, &failures});
    std::optional<report::Report> read = in.stream(all);
    if (!read || read->backward_pending) return std::nullopt;
    report::Report& r = *read;
    std::optional<std::vector<report::OomEvent>> ooms = failures.ooms(r);
    if (!ooms) return std::nullopt;
    print_warnings(r.warnings);
    const report::Summary s = builder.take(r);
    const bool tensors = r.has_tensors();
    PeakAndSteps at;
    at.ooms = std::move(*ooms);
    at.rows = rows.rows(tensors ? report::Series::Tensors : report::Series::Gpu);
    const std::optional<int64_t> peak_t = tensors ? s.tensor_peak_t : s.peak_t;
    const size_t events = tensors ? s.tensor_peak_events : s.peak_events;
    report::LiveSet live;
    if (peaks.has(tensors, events)) {
        r = peaks.take(tensors, std::move(r), peak_t.value_or(0), live);
    } else {
        report::PointObserver point(events, std::nullopt, true);
        in.again(point);
        r = point.take(std::move(r), peak_t.value_or(0), live);
    }
    at.sites = tensors ? report::group_tensors_by_site(r, live)
                       : report::group_by_site(r, live, report::KindFilter::Gpu);
    if (peak_t) {
        const std::unordered_map<size_t, report::Category> tag_map = tags.take();
        report::PointBreakdowns breakdowns(r, category_options(), &tag_map);
        // The time of the point's last event: the peak's (a peak is reached by an event).
        at.categories = breakdowns.at(r, live, events, *peak_t);
    }
    return make_from(r, s, at, frames);
}

}  // namespace

RankSummary make_rank_summary(const report::Report& r, size_t frames) {
    const report::Summary s = report::summarize(r);
    const bool tensors = r.has_tensors();
    PeakAndSteps at;
    at.ooms = report::find_ooms(r);
    const std::optional<int64_t> peak_t = tensors ? s.tensor_peak_t : s.peak_t;
    if (peak_t) {
        at.categories = report::breakdown_at(r, tensors ? s.tensor_peak_events : s.peak_events, category_options());
    }
    at.sites = site_table_at_peak(r, tensors, &s);
    if (!r.steps.empty()) {
        at.rows = report::step_rows(r, report::build_timeline(r),
                                    tensors ? report::Series::Tensors : report::Series::Gpu);
    }
    return make_from(r, s, at, frames);
}

RankSummary summarize_report(const std::string& path, size_t frames) {
    ReportInput in(path);
    if (auto s = stream_rank_summary(in, frames)) return std::move(*s);
    report::Report r = in.load();
    print_warnings(r.warnings);
    return make_rank_summary(r, frames);
}

void json_text_or_null(report::JsonWriter& j, const std::string& text) {
    if (text.empty()) {
        j.null();
    } else {
        j.value(text);
    }
}

void rank_summary_members(report::JsonWriter& j, const RankSummary& s) {
    j.key("schema").value(kRankSummarySchema);
    j.key("schema_version").value(kRankSummaryVersion);
    j.key("report").value(s.report);
    j.key("report_bytes").value(s.report_bytes);
    j.key("complete").value(s.complete);
    j.key("lost_records").value(s.lost_records);
    auto opt_string = [&](const char* key, const std::string& v) { json_text_or_null(j.key(key), v); };
    opt_string("run_id", s.run_id);
    j.key("rank").value_or_null(s.rank);
    opt_string("host", s.host);
    j.key("pid").value_or_null(s.pid);
    opt_string("exe", s.exe);
    j.key("t0_unix_ns").value_or_null(s.t0_unix_ns);
    j.key("devices").begin_array();
    for (int d : s.devices) j.value(d);
    j.end_array();
    j.key("duration_ns").value(s.duration_ns);
    j.key("allocator_mode").value(s.allocator_mode);
    j.key("peak").begin_object();
    j.key("bytes_of").value(s.bytes_of);
    j.key("bytes").value(s.peak().peak_bytes);
    j.key("time_ns").value_or_null(s.peak().peak_time_ns);
    j.end_object();
    j.key("gpu");
    write_level(j, s.gpu);
    j.key("tensors");
    if (s.tensors) {
        write_level(j, *s.tensors);
    } else {
        j.null();
    }
    j.key("categories_at_peak");
    if (!s.has_categories) {
        j.null();
    } else {
        j.begin_array();
        for (const SummaryCategory& c : s.categories) {
            j.begin_object();
            j.key("name").value(c.name);
            j.key("bytes").value(c.bytes);
            j.key("estimated_bytes").value(c.estimated_bytes);
            j.end_object();
        }
        j.end_array();
    }
    j.key("sites_at_peak").begin_object();
    j.key("count").value(s.site_count);
    j.key("cut").value(s.sites_cut);
    j.key("top").begin_array();
    for (const SummarySite& site : s.sites) {
        j.begin_object();
        j.key("label").value(site.label);
        opt_string("user_line", site.user_line);
        j.key("frames").begin_array();
        for (const std::string& f : site.frames) j.value(f);
        j.end_array();
        j.key("bytes").value(site.bytes);
        j.key("blocks").value(site.blocks);
        j.end_object();
    }
    j.end_array();
    j.end_object();
    j.key("ooms").begin_object();
    j.key("count").value(s.ooms);
    j.key("recovered").value(s.recovered);
    j.key("cuda_oom_errors").value(s.cuda_oom_errors);
    j.key("allocator_ooms").value(s.allocator_ooms);
    j.key("events").begin_array();
    for (const SummaryOom& o : s.oom_events) {
        j.begin_object();
        j.key("time_ns").value(o.time_ns);
        j.key("device").value(o.device);
        j.key("request_bytes").value(o.request_bytes);
        j.key("source").value(o.source);
        j.key("recovered").value(o.recovered);
        j.end_object();
    }
    j.end_array();
    j.end_object();
    j.key("collections").begin_object();
    uint64_t count = 0;
    for (const SummaryTrigger& t : s.collections) count = report::saturating_add(count, t.count);
    j.key("count").value(count);
    j.key("cuda_bytes_freed").value(s.collections_freed());
    j.key("by_trigger").begin_object();
    for (const SummaryTrigger& t : s.collections) {
        j.key(t.name).begin_object();
        j.key("count").value(t.count);
        j.key("cuda_bytes_freed").value(t.cuda_bytes_freed);
        j.end_object();
    }
    j.end_object();
    j.end_object();
    j.key("hazards").begin_object();
    j.key("count").value(
        report::saturating_add(report::saturating_add(s.unsafe_calls, s.frees_while_graph_alive), s.warmup_retention));
    j.key("unsafe_call").value(s.unsafe_calls);
    j.key("free_live_graph").value(s.frees_while_graph_alive);
    j.key("warmup_retention").value(s.warmup_retention);
    j.end_object();
    j.key("phases").value(s.phases);
    j.key("compiles").value(s.compiles);
    j.key("steps");
    if (!s.steps) {
        j.null();
    } else {
        const SummarySteps& st = *s.steps;
        j.begin_object();
        j.key("count").value(st.count);
        j.key("bytes_of").value(st.bytes_of);
        j.key("median_duration_ns").value(st.median_duration_ns);
        j.key("max_duration_ns").value(st.max_duration_ns);
        j.key("max_peak_bytes").value(st.max_peak_bytes);
        j.key("median_incremental_peak_bytes").value(st.median_incremental_peak_bytes);
        j.key("last_exit_bytes").value(st.last_exit_bytes);
        j.key("growth");
        if (!st.growth) {
            j.null();
        } else {
            j.begin_object();
            j.key("first_step").value(st.growth->first_step);
            j.key("last_step").value(st.growth->last_step);
            j.key("from_bytes").value(st.growth->from_bytes);
            j.key("to_bytes").value(st.growth->to_bytes);
            j.key("per_step_bytes").value(st.growth->per_step_bytes);
            j.end_object();
        }
        j.end_object();
    }
}

std::string rank_summary_json(RankSummary s) {
    for (;;) {
        report::JsonWriter j;
        j.begin_object();
        rank_summary_members(j, s);
        j.end_object();
        std::string text = j.str();
        if (text.size() <= kRankSummaryMaxBytes || s.sites.empty()) return text;
        s.sites.pop_back();  // the smallest kept site
        s.sites_cut = true;
    }
}

RankSummary parse_rank_summary(std::string_view text, const std::string& name) {
    json doc;
    try {
        doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        throw report::ReportError(name + ": not a rank summary: invalid JSON at byte " + std::to_string(e.byte));
    }
    const Reader rd(name);
    if (!doc.is_object()) rd.fail("(document)", "expected an object");
    if (rd.str(doc, "", "schema") != kRankSummarySchema) rd.fail("schema", "expected \"memguard.rank_summary\"");
    const uint64_t version = rd.u64(doc, "", "schema_version");
    if (version != static_cast<uint64_t>(kRankSummaryVersion)) {
        rd.fail("schema_version", "version " + std::to_string(version) + " (this memguard reads version " +
                                      std::to_string(kRankSummaryVersion) + ")");
    }
    RankSummary s;
    s.report = rd.str(doc, "", "report");
    s.report_bytes = rd.u64(doc, "", "report_bytes");
    s.complete = rd.boolean(doc, "", "complete");
    s.lost_records = rd.u64(doc, "", "lost_records");
    s.run_id = rd.opt_str(doc, "", "run_id");
    s.rank = rd.opt_i64(doc, "", "rank");
    s.host = rd.opt_str(doc, "", "host");
    s.pid = rd.opt_i64(doc, "", "pid");
    s.exe = rd.opt_str(doc, "", "exe");
    s.t0_unix_ns = rd.opt_i64(doc, "", "t0_unix_ns");
    const json& devices = rd.array(doc, "", "devices");
    for (size_t i = 0; i < devices.size(); ++i) {
        if (!devices[i].is_number_integer() || devices[i].get<int64_t>() < 0 ||
            devices[i].get<int64_t>() > report::kMaxDevice) {
            rd.fail(Reader::at("devices", i), "expected a device number");
        }
        s.devices.push_back(devices[i].get<int>());
    }
    s.duration_ns = rd.i64(doc, "", "duration_ns");
    s.allocator_mode = rd.boolean(doc, "", "allocator_mode");
    const json& peak = rd.object(doc, "", "peak");
    s.bytes_of = rd.str(peak, "peak", "bytes_of");
    if (s.bytes_of != "gpu" && s.bytes_of != "tensors") rd.fail("peak.bytes_of", "expected \"gpu\" or \"tensors\"");
    s.gpu = read_level(rd, rd.object(doc, "", "gpu"), "gpu");
    if (!rd.nullish(doc, "", "tensors")) s.tensors = read_level(rd, rd.object(doc, "", "tensors"), "tensors");
    if (s.bytes_of == "tensors" && !s.tensors) rd.fail("tensors", "missing, but peak.bytes_of is \"tensors\"");
    if (rd.u64(peak, "peak", "bytes") != s.peak().peak_bytes) {
        rd.fail("peak.bytes", "differs from the peak_bytes of " + s.bytes_of);
    }
    if (!rd.nullish(doc, "", "categories_at_peak")) {
        s.has_categories = true;
        const json& cats = rd.array(doc, "", "categories_at_peak");
        for (size_t i = 0; i < cats.size(); ++i) {
            const std::string path = Reader::at("categories_at_peak", i);
            s.categories.push_back({rd.str(cats[i], path, "name"), rd.u64(cats[i], path, "bytes"),
                                    rd.u64(cats[i], path, "estimated_bytes")});
        }
    }
    const json& sites = rd.object(doc, "", "sites_at_peak");
    s.site_count = rd.u64(sites, "sites_at_peak", "count");
    s.sites_cut = rd.boolean(sites, "sites_at_peak", "cut");
    const json& top = rd.array(sites, "sites_at_peak", "top");
    for (size_t i = 0; i < top.size(); ++i) {
        const std::string path = Reader::at("sites_at_peak.top", i);
        SummarySite site;
        site.label = rd.str(top[i], path, "label");
        site.user_line = rd.opt_str(top[i], path, "user_line");
        const json& frames = rd.array(top[i], path, "frames");
        for (size_t k = 0; k < frames.size(); ++k) {
            if (!frames[k].is_string()) rd.fail(Reader::at(path + ".frames", k), "expected a string");
            site.frames.push_back(frames[k].get<std::string>());
        }
        site.bytes = rd.u64(top[i], path, "bytes");
        site.blocks = rd.u64(top[i], path, "blocks");
        s.sites.push_back(std::move(site));
    }
    const json& ooms = rd.object(doc, "", "ooms");
    s.ooms = rd.u64(ooms, "ooms", "count");
    s.recovered = rd.u64(ooms, "ooms", "recovered");
    s.cuda_oom_errors = rd.u64(ooms, "ooms", "cuda_oom_errors");
    s.allocator_ooms = rd.u64(ooms, "ooms", "allocator_ooms");
    const json& events = rd.array(ooms, "ooms", "events");
    for (size_t i = 0; i < events.size(); ++i) {
        const std::string path = Reader::at("ooms.events", i);
        const int64_t device = rd.i64(events[i], path, "device");
        if (device < 0 || device > report::kMaxDevice) rd.fail(path + ".device", "expected a device number");
        s.oom_events.push_back({rd.i64(events[i], path, "time_ns"), static_cast<int>(device),
                                rd.u64(events[i], path, "request_bytes"), rd.str(events[i], path, "source"),
                                rd.boolean(events[i], path, "recovered")});
    }
    const json& by_trigger = rd.object(rd.object(doc, "", "collections"), "collections", "by_trigger");
    for (const auto& [name, v] : by_trigger.items()) {
        const std::string path = "collections.by_trigger." + name;
        s.collections.push_back({name, rd.u64(v, path, "count"), rd.i64(v, path, "cuda_bytes_freed")});
    }
    const json& hazards = rd.object(doc, "", "hazards");
    s.unsafe_calls = rd.u64(hazards, "hazards", "unsafe_call");
    s.frees_while_graph_alive = rd.u64(hazards, "hazards", "free_live_graph");
    s.warmup_retention = rd.u64(hazards, "hazards", "warmup_retention");
    s.phases = rd.u64(doc, "", "phases");
    s.compiles = rd.u64(doc, "", "compiles");
    if (!rd.nullish(doc, "", "steps")) {
        const json& st = rd.object(doc, "", "steps");
        SummarySteps steps;
        steps.count = rd.u64(st, "steps", "count");
        steps.bytes_of = rd.str(st, "steps", "bytes_of");
        steps.median_duration_ns = rd.i64(st, "steps", "median_duration_ns");
        steps.max_duration_ns = rd.i64(st, "steps", "max_duration_ns");
        steps.max_peak_bytes = rd.u64(st, "steps", "max_peak_bytes");
        steps.median_incremental_peak_bytes = rd.u64(st, "steps", "median_incremental_peak_bytes");
        steps.last_exit_bytes = rd.u64(st, "steps", "last_exit_bytes");
        if (!rd.nullish(st, "steps", "growth")) {
            const json& g = rd.object(st, "steps", "growth");
            SummaryGrowth growth;
            const uint64_t first = rd.u64(g, "steps.growth", "first_step");
            const uint64_t last = rd.u64(g, "steps.growth", "last_step");
            if (first > UINT32_MAX || last > UINT32_MAX) rd.fail("steps.growth", "step number out of range");
            growth.first_step = static_cast<uint32_t>(first);
            growth.last_step = static_cast<uint32_t>(last);
            growth.from_bytes = rd.u64(g, "steps.growth", "from_bytes");
            growth.to_bytes = rd.u64(g, "steps.growth", "to_bytes");
            growth.per_step_bytes = rd.u64(g, "steps.growth", "per_step_bytes");
            steps.growth = growth;
        }
        s.steps = steps;
    }
    return s;
}

std::string summary_path_of(const std::string& report_path) { return report_path + ".summary.json"; }

bool is_summary_path(const std::string& path) {
    static const std::string suffix = ".summary.json";
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

RankSummary read_rank_summary(const std::string& path) { return parse_rank_summary(read_file(path), path); }

std::optional<RankSummary> current_summary_beside(const std::string& report_path) {
    const std::string path = summary_path_of(report_path);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
    try {
        RankSummary s = read_rank_summary(path);
        if (s.report_bytes != file_size(report_path)) return std::nullopt;  // the report grew since
        s.report = report_path;
        return s;
    } catch (const report::ReportError& e) {
        print_warnings({std::string(e.what()) + " (the report is read instead)"});
        return std::nullopt;
    }
}

std::string write_rank_summary(const std::string& report_path) {
    const std::string text = rank_summary_json(summarize_report(report_path, kSummaryFrames));
    const std::string path = summary_path_of(report_path);
    (void)write_output_file(path, text);
    return path;
}

}  // namespace memguard::cli

// Chrome trace-event JSON (the format ui.perfetto.dev and chrome://tracing open). Times are
// microseconds since the run's clock origin. Slices that may overlap others of their thread
// (captures, NVTX start/end ranges) are async slices (b/e with an id); phases of the API and NVTX
// push/pop ranges are complete slices (X) on their thread; collections are complete slices on a
// track of their own; compiles and marks are instants.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "export.h"
#include "report/json.h"
#include "report/timeline.h"
#include "report/units.h"

namespace memguard::cli {

namespace {

// Track ids for the synthetic threads: above any Linux thread id (at most 2^22).
constexpr uint64_t kCollectionsTrack = 1000000001;
constexpr uint64_t kCompilesTrack = 1000000002;

/// Nanoseconds as microseconds with three decimals (the format's unit, exact).
std::string us(int64_t ns) {
    uint64_t a = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%llu.%03llu", ns < 0 ? "-" : "", static_cast<unsigned long long>(a / 1000),
                  static_cast<unsigned long long>(a % 1000));
    return buf;
}

class TraceWriter {
public:
    explicit TraceWriter(uint64_t pid) : pid_(pid) {
        j_.begin_object();
        j_.key("displayTimeUnit").value("ms");
        j_.key("traceEvents").begin_array();
    }

    /// Opens an event object with the common fields; the caller adds more and calls end().
    report::JsonWriter& event(const std::string& name, const char* ph, int64_t t_ns, uint64_t tid,
                              const char* cat = nullptr) {
        j_.begin_object();
        j_.key("name").value(name);
        if (cat) j_.key("cat").value(cat);
        j_.key("ph").value(ph);
        j_.key("ts").number(us(t_ns < 0 ? 0 : t_ns));
        j_.key("pid").value(pid_);
        j_.key("tid").value(tid);
        return j_;
    }
    void end() { j_.end_object(); }

    void metadata(const char* what, uint64_t tid, const std::string& name) {
        j_.begin_object();
        j_.key("name").value(what);
        j_.key("ph").value("M");
        j_.key("pid").value(pid_);
        j_.key("tid").value(tid);
        j_.key("args").begin_object().key("name").value(name).end_object();
        j_.end_object();
    }

    std::string finish() {
        j_.end_array();
        j_.end_object();
        return j_.str();
    }

private:
    report::JsonWriter j_;
    uint64_t pid_;
};

void counters(TraceWriter& w, const report::Report& r, const report::Timeline& tl, uint64_t pid) {
    // One sample per distinct time: the state after the last event at that time.
    for (size_t k = 0; k < tl.points.size(); ++k) {
        if (k + 1 < tl.points.size() && tl.points[k + 1].t == tl.points[k].t && k != 0) continue;
        const report::LevelPoint& p = tl.points[k];
        report::JsonWriter& j = w.event("GPU live bytes", "C", p.t, pid);
        j.key("args").begin_object().key("bytes").value(p.live).end_object();
        w.end();
        if (tl.has_tensors) {  // allocator mode: torch.cuda.memory_allocated() beside the segments
            w.event("tensor bytes", "C", p.t, pid).key("args").begin_object().key("bytes").value(p.tensor).end_object();
            w.end();
        }
        if (!tl.has_vmm) continue;
        w.event("mapped bytes", "C", p.t, pid).key("args").begin_object().key("bytes").value(p.mapped).end_object();
        w.end();
        w.event("reserved address space", "C", p.t, pid)
            .key("args")
            .begin_object()
            .key("bytes")
            .value(p.reserved)
            .end_object();
        w.end();
    }
    (void)r;
}

/// The phases' and marks' bytes are of `series` (in allocator mode the tensor bytes, as `memguard
/// phases` gives them).
void phases(TraceWriter& w, const report::Report& r, const report::Timeline& tl, report::Series series,
            std::set<uint64_t>& tids) {
    std::vector<report::PhaseStats> stats = report::phase_stats(r, tl, series);
    for (const report::PhaseStats& s : stats) {
        const report::Phase& p = r.phases[s.index];
        bool range = p.source == report::PhaseSource::NvtxRange;
        auto args = [&](report::JsonWriter& j) {
            j.key("args").begin_object();
            j.key("source").value(report::phase_source_name(p.source));
            j.key("entry_bytes").value(s.entry_bytes);
            j.key("peak_bytes").value(s.peak_bytes);
            j.key("incremental_peak_bytes").value(s.incremental_peak());
            j.key("exit_bytes").value(s.exit_bytes);
            j.key("bytes_of").value(report::series_name(series));
            j.key("ended").value(p.t_end.has_value());
            j.end_object();
        };
        if (range) {
            report::JsonWriter& j = w.event(p.name, "b", p.t_begin, p.tid, "nvtx_range");
            j.key("id").value("phase" + std::to_string(p.id));
            args(j);
            w.end();
            w.event(p.name, "e", s.t_end, p.tid, "nvtx_range").key("id").value("phase" + std::to_string(p.id));
            w.end();
        } else {
            report::JsonWriter& j = w.event(p.name, "X", p.t_begin, p.tid, "phase");
            j.key("dur").number(us(s.t_end - p.t_begin));
            args(j);
            w.end();
        }
        tids.insert(p.tid);
    }
    for (const report::Mark& m : r.marks) {
        report::JsonWriter& j = w.event(m.name, "i", m.t, m.tid, "mark");
        j.key("s").value("t");
        j.key("args").begin_object().key("live_bytes").value(report::live_at_mark(m, tl, series)).end_object();
        w.end();
        tids.insert(m.tid);
    }
}

void captures(TraceWriter& w, const report::Report& r, std::set<uint64_t>& tids) {
    for (const report::Capture& c : r.captures) {
        std::string name = "capture " + std::to_string(c.id);
        std::string id = "capture" + std::to_string(c.id);
        report::JsonWriter& j = w.event(name, "b", c.t_begin, c.tid, "capture");
        j.key("id").value(id);
        j.key("args").begin_object();
        j.key("mode").value(report::capture_mode_name(c.mode));
        j.key("ended").value(c.t_end.has_value());
        j.key("end_error").value(c.end_error);
        j.end_object();
        w.end();
        w.event(name, "e", c.t_end.value_or(r.end_t), c.tid, "capture").key("id").value(id);
        w.end();
        tids.insert(c.tid);
    }
}

void collections(TraceWriter& w, const report::Report& r) {
    for (const report::Collection& y : r.collections) {
        std::string name = std::string("gc (") + report::trigger_name(y.trigger) + ")";
        report::JsonWriter& j = w.event(name, "X", y.t - y.duration_ns, kCollectionsTrack, "gc");
        j.key("dur").number(us(y.duration_ns));
        j.key("args").begin_object();
        j.key("thread").value(y.tid);
        j.key("generation").value(y.generation);
        j.key("collected").value(y.collected);
        j.key("cuda_bytes_freed").value_or_null(y.cuda_bytes_freed);
        j.end_object();
        w.end();
    }
    for (const report::Compile& x : r.compiles) {
        report::JsonWriter& j = w.event("compile " + x.id, "i", x.t, kCompilesTrack, "compile");
        j.key("s").value("t");
        j.key("args").begin_object().key("thread").value(x.tid).end_object();
        w.end();
    }
}

}  // namespace

std::string perfetto_json(const report::Report& r) {
    uint64_t pid = 0;
    if (auto it = r.info.find("pid"); it != r.info.end()) pid = std::strtoull(it->second.c_str(), nullptr, 10);
    TraceWriter w(pid);
    std::string process = "memguard";
    if (auto it = r.info.find("exe"); it != r.info.end()) process += ": " + it->second;
    if (auto it = r.info.find("rank"); it != r.info.end()) process += " (rank " + it->second + ")";
    w.metadata("process_name", pid, process);
    w.metadata("thread_name", kCollectionsTrack, "garbage collections");
    w.metadata("thread_name", kCompilesTrack, "torch.compile compiles");
    report::Timeline tl = report::build_timeline(r);
    std::set<uint64_t> tids;
    counters(w, r, tl, pid);
    phases(w, r, tl, tl.has_tensors ? report::Series::Tensors : report::Series::Gpu, tids);
    captures(w, r, tids);
    collections(w, r);
    for (uint64_t tid : tids) {
        w.metadata("thread_name", tid,
                   tid == pid ? "main thread " + std::to_string(tid) : "thread " + std::to_string(tid));
    }
    return w.finish();
}

}  // namespace memguard::cli

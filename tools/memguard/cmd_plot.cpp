// memguard plot FILE -o OUT.svg|OUT.html|- [--format svg|html] [--frames K]: GPU memory over time
// as a picture, drawn by hand as SVG (no plotting dependency). What is drawn, top to bottom: the
// phases (one lane per nesting depth) and capture windows as labelled spans; the chart with GPU
// live bytes (filled), mapped bytes and reserved address space (lines, when the driver's virtual
// memory calls were used), allocator mode's tensor bytes (a line) over its segments, collections as
// vertical lines (memguard's own in red, labelled with what they freed), compiles as triangles on
// the time axis, OOM events as red crosses, and the peak marked and annotated with its largest
// allocation site and the phase it fell in. Every mark has a <title>, which browsers show on hover.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

#include "cli.h"
#include "common/text.h"
#include "output.h"
#include "report/collections.h"
#include "report/timeline.h"
#include "report/units.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

constexpr double kWidth = 1400, kLeft = 90, kRight = 30, kLaneHeight = 20, kChartHeight = 380;
constexpr int kMaxPhaseLanes = 4;

/// Text for SVG and HTML, well-formed XML whatever a report holds: the markup characters are
/// escaped, and bytes that are not UTF-8 and the characters XML 1.0 forbids (C0 controls but TAB,
/// LF and CR; U+FFFE, U+FFFF) become U+FFFD, so that a parser neither stops at them nor reads markup.
std::string xml(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        size_t len = text::utf8_sequence(s, i, &cp);
        bool allowed = len != 0 && (cp >= 0x20 || cp == '\t' || cp == '\n' || cp == '\r') && cp != 0xfffe &&
                       cp != 0xffff;
        if (!allowed) {
            out += "\xef\xbf\xbd";
            i += len == 0 ? 1 : len;
            continue;
        }
        switch (cp) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        case '\r': out += "&#13;"; break;  // kept: a parser would read a raw one as a line feed
        default: out.append(s, i, len);
        }
        i += len;
    }
    return out;
}

/// `s` cut to at most `fit` characters, the last of them an ellipsis when it was cut; a character
/// is never split, so a cut name stays UTF-8.
std::string shorten(const std::string& s, size_t fit) {
    size_t chars = 0, cut = 0;
    for (size_t i = 0; i < s.size(); ++chars) {
        if (chars + 1 == fit) cut = i;
        size_t len = text::utf8_sequence(s, i);
        i += len == 0 ? 1 : len;
    }
    return chars <= fit ? s : s.substr(0, cut) + "…";
}

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

std::string secs(int64_t ns) { return report::seconds_fixed3(ns) + " s"; }

/// A "nice" step for about `n` ticks over `range`: 1, 2 or 5 times a power of `base`.
double nice_step(double range, int n, double base) {
    if (range <= 0) return 1;
    double raw = range / n;
    double p = std::pow(base, std::floor(std::log(raw) / std::log(base)));
    for (double m : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0}) {
        if (p * m >= raw) return p * m;
    }
    return p * 1000;
}

struct Plot {
    explicit Plot(const report::Report& report) : r(report) {}
    const report::Report& r;
    report::Timeline tl;
    std::vector<report::PhaseStats> phases;
    report::Summary summary;
    // The peak the note marks: in allocator mode (tl.has_tensors) the tensor bytes'
    // (torch.cuda.max_memory_allocated), as `top` and `phases` answer there; otherwise the GPU bytes'.
    std::optional<int64_t> peak_t;
    uint64_t peak_bytes = 0;
    size_t peak_events = 0;
    std::string peak_site;
    std::string peak_phase;
    std::vector<int64_t> max_t;  // the running maximum of tl.points' times (live_at_time)
    int64_t t_max = 1;
    uint64_t y_max = 1;
    int phase_lanes = 0;
    int nested_lanes = 0;  // lanes of the phases other than NVTX start/end ranges
    double chart_top = 0, chart_bottom = 0, height = 0;
    std::ostringstream svg;

    double x(int64_t t) const {
        double span = kWidth - kLeft - kRight;
        return kLeft + span * static_cast<double>(std::clamp<int64_t>(t, 0, t_max)) / static_cast<double>(t_max);
    }
    double y(uint64_t bytes) const {
        return chart_bottom - (chart_bottom - chart_top) * static_cast<double>(bytes) / static_cast<double>(y_max);
    }
};

/// The lane of a phase: API phases and NVTX push/pop ranges by nesting depth (the deepest ones share
/// the last of kMaxPhaseLanes lanes); NVTX start/end ranges, which may overlap anything, in lanes of
/// their own below those.
int phase_lane(const Plot& p, const report::PhaseStats& s) {
    if (p.r.phases[s.index].source != report::PhaseSource::NvtxRange) return std::min(s.depth, kMaxPhaseLanes - 1);
    return p.nested_lanes + std::min(s.depth, 1);
}

void prepare(Plot& p, size_t frames) {
    const report::Report& r = p.r;
    p.tl = report::build_timeline(r);
    // In allocator mode the phase figures are of the tensor bytes, as `memguard phases` gives them.
    p.phases = report::phase_stats(r, p.tl, p.tl.has_tensors ? report::Series::Tensors : report::Series::Gpu);
    p.summary = report::summarize(r);
    p.t_max = std::max<int64_t>(r.end_t, 1);
    for (const report::PhaseStats& s : p.phases) {
        if (r.phases[s.index].source != report::PhaseSource::NvtxRange) {
            p.nested_lanes = std::max(p.nested_lanes, std::min(s.depth, kMaxPhaseLanes - 1) + 1);
        }
    }
    for (const report::LevelPoint& pt : p.tl.points) {
        p.max_t.push_back(p.max_t.empty() ? pt.t : std::max(p.max_t.back(), pt.t));
        p.t_max = std::max(p.t_max, pt.t);
        p.y_max = std::max({p.y_max, pt.live, pt.mapped, pt.reserved, pt.tensor});
    }
    // Headroom above the highest value, so the peak and its note are not on the frame.
    p.y_max += p.y_max / 4;
    for (const report::PhaseStats& s : p.phases) p.phase_lanes = std::max(p.phase_lanes, phase_lane(p, s) + 1);
    p.peak_t = p.tl.has_tensors ? p.summary.tensor_peak_t : p.summary.peak_t;
    p.peak_bytes = p.tl.has_tensors ? p.summary.tensor_peak_bytes : p.summary.peak_bytes;
    p.peak_events = p.tl.has_tensors ? p.summary.tensor_peak_events : p.summary.peak_events;
    if (p.peak_t) {
        PeakSite top = top_site_at_peak(r, frames, &p.summary);  // the tensor blocks' in allocator mode, as here
        if (!top.label.empty()) {
            p.peak_site = top.label + " (" + human_bytes(top.bytes) + ", " +
                          report::percent(top.bytes, top.total_bytes) + ")";
        }
        // The innermost phase holding the peak.
        int depth = -1;
        for (const report::PhaseStats& s : p.phases) {
            const report::Phase& ph = r.phases[s.index];
            size_t end = ph.t_end ? ph.events_at_end : r.events.size();
            if (ph.events_at_begin < p.peak_events && p.peak_events <= end && s.depth > depth) {
                depth = s.depth;
                p.peak_phase = ph.name;
            }
        }
    }
    double lanes = p.phase_lanes + (r.captures.empty() ? 0 : 1);
    p.chart_top = 70 + lanes * kLaneHeight + 10;
    p.chart_bottom = p.chart_top + kChartHeight;
    p.height = p.chart_bottom + 110;
}

/// "peak 2.75 GiB at 1.600 s", or in allocator mode "tensor peak 16.00 MiB at 0.350 s".
std::string peak_text(const Plot& p) {
    return std::string(p.tl.has_tensors ? "tensor peak " : "peak ") + human_bytes(p.peak_bytes) + " at " +
           secs(*p.peak_t);
}

void title(Plot& p) {
    std::ostringstream& s = p.svg;
    std::string head = "GPU memory over time: " + p.r.path;
    s << "<text x=\"" << kLeft << "\" y=\"24\" class=\"title\">" << xml(head) << "</text>\n";
    std::string sub;
    if (p.peak_t) {
        sub = peak_text(p);
        if (!p.peak_phase.empty()) sub += " in phase \"" + p.peak_phase + "\"";
        if (!p.peak_site.empty()) sub += "; largest site: " + p.peak_site;
    } else {
        sub = p.tl.has_tensors ? "no tensor memory was ever live" : "no GPU memory was ever live";
    }
    if (p.tl.has_tensors && p.summary.peak_t) {
        sub += " | segments peak " + human_bytes(p.summary.peak_bytes) + " at " + secs(*p.summary.peak_t);
    }
    sub += p.tl.has_tensors ? " | tensors at exit " + human_bytes(p.summary.tensor_live_bytes_at_exit)
                            : " | live at exit " + human_bytes(p.summary.live_bytes_at_exit);
    sub += " | " + plural(p.summary.oom_events + p.summary.tensor_oom_events, "OOM event", "OOM events");
    s << "<text x=\"" << kLeft << "\" y=\"46\" class=\"sub\">" << xml(sub) << "</text>\n";
}

void axes(Plot& p) {
    std::ostringstream& s = p.svg;
    s << "<rect x=\"" << kLeft << "\" y=\"" << num(p.chart_top) << "\" width=\"" << num(kWidth - kLeft - kRight)
      << "\" height=\"" << num(p.chart_bottom - p.chart_top) << "\" class=\"frame\"/>\n";
    double ystep = nice_step(static_cast<double>(p.y_max), 5, 2);
    for (double v = 0; v <= static_cast<double>(p.y_max) * 1.0001; v += ystep) {
        double yy = p.y(static_cast<uint64_t>(v));
        s << "<line x1=\"" << kLeft << "\" x2=\"" << num(kWidth - kRight) << "\" y1=\"" << num(yy) << "\" y2=\""
          << num(yy) << "\" class=\"grid\"/>";
        s << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(yy + 4) << "\" class=\"ytick\">"
          << xml(human_bytes(static_cast<uint64_t>(v))) << "</text>\n";
    }
    double tsec = static_cast<double>(p.t_max) / 1e9;
    double xstep = nice_step(tsec, 10, 10);
    for (double v = 0; v <= tsec * 1.0001; v += xstep) {
        double xx = p.x(static_cast<int64_t>(v * 1e9));
        s << "<line x1=\"" << num(xx) << "\" x2=\"" << num(xx) << "\" y1=\"" << num(p.chart_bottom) << "\" y2=\""
          << num(p.chart_bottom + 5) << "\" class=\"axis\"/>";
        char label[32];
        std::snprintf(label, sizeof label, "%g", std::round(v * 1e6) / 1e6);
        s << "<text x=\"" << num(xx) << "\" y=\"" << num(p.chart_bottom + 18) << "\" class=\"xtick\">" << label
          << "</text>\n";
    }
    s << "<text x=\"" << num((kLeft + kWidth - kRight) / 2) << "\" y=\"" << num(p.chart_bottom + 36)
      << "\" class=\"xtick\">time since start (s)</text>\n";
}

/// A step path of one series, at most a few vertices per pixel column: each column keeps its
/// largest value, so the peak survives any amount of downsampling.
std::string series_path(const Plot& p, uint64_t report::LevelPoint::*field, bool area) {
    std::ostringstream d;
    const auto& pts = p.tl.points;
    double last_y = p.y(0);
    d << "M" << num(p.x(0)) << "," << num(last_y);
    size_t i = 0;
    while (i < pts.size()) {
        double col = std::floor(p.x(pts[i].t));
        uint64_t hi = pts[i].*field;
        size_t j = i;
        while (j + 1 < pts.size() && std::floor(p.x(pts[j + 1].t)) == col) hi = std::max(hi, pts[++j].*field);
        double xx = p.x(pts[i].t);
        d << " L" << num(xx) << "," << num(last_y) << " L" << num(xx) << "," << num(p.y(hi));
        last_y = p.y(pts[j].*field);
        if (j > i)
            d << " L" << num(std::min(xx + 1, p.x(p.t_max))) << "," << num(p.y(hi)) << " L"
              << num(std::min(xx + 1, p.x(p.t_max))) << "," << num(last_y);
        i = j + 1;
    }
    d << " L" << num(p.x(p.t_max)) << "," << num(last_y);
    if (area) d << " L" << num(p.x(p.t_max)) << "," << num(p.y(0)) << " Z";
    return d.str();
}

void lanes(Plot& p) {
    std::ostringstream& s = p.svg;
    static const char* const fills[] = {"#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb", "#fcbba1", "#d9d9d9"};
    double lane_top = 60;
    if (p.phase_lanes > 0) {
        s << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(lane_top + 14) << "\" class=\"ytick\">phases</text>\n";
    }
    for (size_t i = 0; i < p.phases.size(); ++i) {
        const report::PhaseStats& st = p.phases[i];
        const report::Phase& ph = p.r.phases[st.index];
        int lane = phase_lane(p, st);
        bool range = ph.source == report::PhaseSource::NvtxRange;
        double x0 = p.x(ph.t_begin), x1 = std::max(p.x(st.t_end), x0 + 1);
        double yy = lane_top + lane * kLaneHeight;
        const char* fill = fills[i % 6];
        std::string tip = ph.name + " (" + report::phase_source_name(ph.source) + ", thread " + std::to_string(ph.tid) +
                          ")\n" + secs(ph.t_begin) + " to " + secs(st.t_end) + (ph.t_end ? "" : " (never ended)") +
                          (p.tl.has_tensors ? "\ntensor bytes: entry " : "\nentry ") + human_bytes(st.entry_bytes) +
                          ", peak " + human_bytes(st.peak_bytes) + ", incremental peak " +
                          human_bytes(st.incremental_peak()) + ", exit " + human_bytes(st.exit_bytes);
        s << "<g class=\"phase\"><title>" << xml(tip) << "</title>";
        s << "<rect x=\"" << num(x0) << "\" y=\"" << num(yy) << "\" width=\"" << num(x1 - x0) << "\" height=\""
          << kLaneHeight - 2 << "\" fill=\"" << fill << "\" class=\"" << (range ? "span range" : "span") << "\"/>";
        // The span again, faintly, behind the chart: what was going on at each moment.
        if (st.depth == 0 && !range) {
            s << "<rect x=\"" << num(x0) << "\" y=\"" << num(p.chart_top) << "\" width=\"" << num(x1 - x0)
              << "\" height=\"" << num(p.chart_bottom - p.chart_top) << "\" fill=\"" << fill << "\" opacity=\"0.35\"/>";
        }
        // The name when it fits (about 6.5 px per character at 11 px).
        size_t fit = static_cast<size_t>(std::max(0.0, (x1 - x0 - 6) / 6.5));
        if (fit >= 3) {
            std::string name = shorten(ph.name, fit);
            s << "<text x=\"" << num(x0 + 3) << "\" y=\"" << num(yy + 13) << "\" class=\"label\">" << xml(name)
              << "</text>";
        }
        s << "</g>\n";
    }
    if (p.r.captures.empty()) return;
    double yy = lane_top + p.phase_lanes * kLaneHeight;
    s << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(yy + 14) << "\" class=\"ytick\">captures</text>\n";
    for (const report::Capture& c : p.r.captures) {
        double x0 = p.x(c.t_begin), x1 = std::max(p.x(c.t_end.value_or(p.r.end_t)), x0 + 2);
        std::string tip = "stream capture " + std::to_string(c.id) + " (" + report::capture_mode_name(c.mode) +
                          " mode, thread " + std::to_string(c.tid) + ")\n" + secs(c.t_begin) + " to " +
                          (c.t_end ? secs(*c.t_end) : std::string("the end (never ended)"));
        s << "<g class=\"capture\"><title>" << xml(tip) << "</title><rect x=\"" << num(x0) << "\" y=\"" << num(yy)
          << "\" width=\"" << num(x1 - x0) << "\" height=\"" << kLaneHeight - 2 << "\" class=\"capspan\"/>"
          << "<rect x=\"" << num(x0) << "\" y=\"" << num(p.chart_top) << "\" width=\"" << num(x1 - x0) << "\" height=\""
          << num(p.chart_bottom - p.chart_top) << "\" class=\"capwin\"/>";
        if (x1 - x0 > 30) {
            s << "<text x=\"" << num(x0 + 3) << "\" y=\"" << num(yy + 13) << "\" class=\"label\">capture " << c.id
              << "</text>";
        }
        s << "</g>\n";
    }
}

void series(Plot& p) {
    std::ostringstream& s = p.svg;
    s << "<path id=\"live\" class=\"live\" d=\"" << series_path(p, &report::LevelPoint::live, true)
      << "\"><title>GPU live bytes</title></path>\n";
    if (p.tl.has_tensors) {
        s << "<path id=\"tensor\" class=\"tensor\" d=\"" << series_path(p, &report::LevelPoint::tensor, false)
          << "\"><title>tensor bytes (memguard's allocator: torch.cuda.memory_allocated())</title></path>\n";
    }
    if (!p.tl.has_vmm) return;
    s << "<path id=\"mapped\" class=\"mapped\" d=\"" << series_path(p, &report::LevelPoint::mapped, false)
      << "\"><title>mapped bytes (cuMemMap)</title></path>\n";
    s << "<path id=\"reserved\" class=\"reserved\" d=\"" << series_path(p, &report::LevelPoint::reserved, false)
      << "\"><title>reserved address space (cuMemAddressReserve)</title></path>\n";
}

/// GPU live bytes at `t`: the state after the events before the first one later than `t` (as `top --at`),
/// that is the level of the point before the first point later than t (the first point's when
/// none is before it). Points are in file order, which threads recording at once can leave a little
/// out of time order: the search runs on their running maximum time (Plot::max_t), which is sorted
/// and first exceeds t where the points first do. A binary search: a run can have many OOM marks.
uint64_t live_at_time(const Plot& p, int64_t t) {
    const auto& pts = p.tl.points;
    if (pts.empty()) return 0;
    auto first_later = std::upper_bound(p.max_t.begin() + 1, p.max_t.end(), t);
    return pts[static_cast<size_t>(first_later - p.max_t.begin()) - 1].live;
}

void events(Plot& p) {
    std::ostringstream& s = p.svg;
    for (const report::Collection& c : p.r.collections) {
        bool freed = c.cuda_bytes_freed && *c.cuda_bytes_freed > 0;
        if (c.trigger == report::GcTrigger::Automatic && !freed) continue;
        bool ours = c.trigger == report::GcTrigger::Memguard;
        double xx = p.x(c.t);
        std::string what = std::string(ours ? "memguard's compile-garbage collection" : "gc (") +
                           (ours ? "" : std::string(report::trigger_name(c.trigger)) + ")");
        std::string tip = what + " at " + secs(c.t) + ": freed " +
                          (c.cuda_bytes_freed ? report::human_bytes_signed(*c.cuda_bytes_freed) : std::string("?")) +
                          " of CUDA memory, " + std::to_string(c.collected) + " objects, " +
                          report::milliseconds_fixed3(c.duration_ns) + " ms";
        s << "<g class=\"" << (ours ? "gc_memguard" : "gc") << "\"><title>" << xml(tip) << "</title><line x1=\""
          << num(xx) << "\" x2=\"" << num(xx) << "\" y1=\"" << num(p.chart_top) << "\" y2=\"" << num(p.chart_bottom)
          << "\"/>";
        if (ours && freed) {
            s << "<text x=\"" << num(xx + 3) << "\" y=\"" << num(p.chart_top + 12) << "\" class=\"gclabel\">gc −"
              << xml(human_bytes(static_cast<uint64_t>(*c.cuda_bytes_freed))) << "</text>";
        }
        s << "</g>\n";
    }
    for (const report::Compile& c : p.r.compiles) {
        double xx = p.x(c.t), yy = p.chart_bottom;
        s << "<g class=\"compile\"><title>" << xml("torch.compile compile " + c.id + " finished at " + secs(c.t))
          << "</title><path d=\"M" << num(xx) << "," << num(yy - 9) << " L" << num(xx - 5) << "," << num(yy) << " L"
          << num(xx + 5) << "," << num(yy) << " Z\"/>";
        if (p.r.compiles.size() <= 20) {
            s << "<text x=\"" << num(xx + 7) << "\" y=\"" << num(yy - 3) << "\" class=\"compilelabel\">compile "
              << xml(c.id) << "</text>";
        }
        s << "</g>\n";
    }
    // On the curve at that moment: the allocation failed on top of what was live.
    auto cross = [&](int64_t t, uint64_t requested, const std::string& title) {
        double xx = p.x(t), yy = std::max(p.chart_top + 6, p.y(live_at_time(p, t)) - 12);
        s << "<g class=\"oom\"><title>" << xml(title) << "</title><path d=\"M" << num(xx - 5) << "," << num(yy - 5)
          << " L" << num(xx + 5) << "," << num(yy + 5) << " M" << num(xx - 5) << "," << num(yy + 5) << " L"
          << num(xx + 5) << "," << num(yy - 5) << "\"/>"
          << "<text x=\"" << num(xx + 8) << "\" y=\"" << num(yy + 4) << "\" class=\"oomlabel\">OOM "
          << xml(human_bytes(requested)) << "</text></g>\n";
    };
    for (const report::FailedAlloc& f : p.r.failures) {
        if (!f.is_oom()) continue;
        cross(f.t, f.size,
              "out of memory at " + secs(f.t) + ": " + human_bytes(f.size) + " requested (" + f.api + "), " +
                  human_bytes(f.live_bytes) + " live on device " + std::to_string(f.device));
    }
    for (const report::TensorOom& o : p.r.tensor_ooms) {  // allocator mode (O records)
        cross(o.t, o.requested,
              "out of memory at " + secs(o.t) + " (memguard's allocator): " + human_bytes(o.requested) +
                  " requested, " + human_bytes(o.allocated) + " allocated and " + human_bytes(o.reserved) +
                  " reserved on device " + std::to_string(o.device) + "; tried: " + o.rescued);
    }
}

/// The highest value of any series drawn between two x positions.
uint64_t highest_under(const Plot& p, double x0, double x1) {
    uint64_t hi = 0;
    for (size_t k = 0; k < p.tl.points.size(); ++k) {
        const report::LevelPoint& pt = p.tl.points[k];
        // A level holds from its point to the next one.
        double from = p.x(pt.t), to = k + 1 < p.tl.points.size() ? p.x(p.tl.points[k + 1].t) : p.x(p.t_max);
        if (to < x0 || from > x1) continue;
        hi = std::max({hi, pt.live, pt.mapped, pt.reserved, pt.tensor});
    }
    return hi;
}

void peak(Plot& p) {
    if (!p.peak_t) return;
    std::ostringstream& s = p.svg;
    double xx = p.x(*p.peak_t), yy = p.y(p.peak_bytes);
    std::string line1 = peak_text(p);
    std::string line2 = p.peak_site.empty() ? "" : "top site: " + p.peak_site;
    std::string line3 = p.peak_phase.empty() ? "" : "in phase: " + p.peak_phase;
    s << "<g id=\"peak\" class=\"peak\"><title>" << xml(line1 + "\n" + line2 + "\n" + line3) << "</title>";
    s << "<circle cx=\"" << num(xx) << "\" cy=\"" << num(yy) << "\" r=\"6\"/>";
    // The note sits at the top of the chart (in the headroom), on the side of the peak where the
    // curves stay lowest, so that it hides as little of them as possible.
    double width = 7.0 * static_cast<double>(std::max({line1.size(), line2.size(), line3.size()})) + 12;
    double box_h = 18.0 * (1 + !line2.empty() + !line3.empty()) + 6;
    double right_x = std::min(xx + 14, kWidth - kRight - width - 2);
    double left_x = std::max(kLeft + 2, xx - 14 - width);
    bool left = highest_under(p, left_x, left_x + width) < highest_under(p, right_x, right_x + width);
    double nx = left ? left_x : right_x;
    double ny = p.chart_top + 4;
    s << "<line x1=\"" << num(xx) << "\" y1=\"" << num(yy) << "\" x2=\"" << num(left ? nx + width : nx) << "\" y2=\""
      << num(ny) << "\" class=\"leader\"/>";
    s << "<rect x=\"" << num(nx) << "\" y=\"" << num(ny) << "\" width=\"" << num(width) << "\" height=\"" << num(box_h)
      << "\" class=\"note\"/>";
    double ty = ny + 17;
    for (const std::string& l : {line1, line2, line3}) {
        if (l.empty()) continue;
        s << "<text x=\"" << num(nx + 6) << "\" y=\"" << num(ty) << "\" class=\""
          << (&l == &line1 ? "notehead" : "notetext") << "\">" << xml(l) << "</text>";
        ty += 18;
    }
    s << "</g>\n";
}

void legend(Plot& p) {
    std::ostringstream& s = p.svg;
    double yy = p.chart_bottom + 62, xx = kLeft;
    auto item = [&](const std::string& swatch, const std::string& label) {
        s << "<g transform=\"translate(" << num(xx) << "," << num(yy) << ")\">" << swatch << "<text x=\"22\" y=\"4\" "
          << "class=\"legend\">" << xml(label) << "</text></g>\n";
        xx += 36 + 7.0 * static_cast<double>(label.size());
    };
    item("<rect x=\"0\" y=\"-6\" width=\"16\" height=\"10\" class=\"live\"/>",
         p.tl.has_tensors ? "GPU live bytes (allocator segments)" : "GPU live bytes");
    if (p.tl.has_tensors) item("<line x1=\"0\" x2=\"16\" y1=\"0\" y2=\"0\" class=\"tensor\"/>", "tensor bytes");
    if (p.tl.has_vmm) {
        item("<line x1=\"0\" x2=\"16\" y1=\"0\" y2=\"0\" class=\"mapped\"/>", "mapped bytes");
        item("<line x1=\"0\" x2=\"16\" y1=\"0\" y2=\"0\" class=\"reserved\"/>", "reserved address space");
    }
    // Only what the picture shows.
    bool ours = false, others = false;
    for (const report::Collection& c : p.r.collections) {
        bool freed = c.cuda_bytes_freed && *c.cuda_bytes_freed > 0;
        ours = ours || c.trigger == report::GcTrigger::Memguard;
        others = others || c.trigger == report::GcTrigger::Explicit || freed;
    }
    if (ours)
        item("<line x1=\"8\" x2=\"8\" y1=\"-7\" y2=\"6\" style=\"stroke:#d62728;stroke-width:2\"/>", "memguard gc");
    if (others)
        item("<line x1=\"8\" x2=\"8\" y1=\"-7\" y2=\"6\" style=\"stroke:#555;stroke-dasharray:3 2\"/>", "other gc");
    if (!p.r.compiles.empty()) item("<path d=\"M8,-7 L3,4 L13,4 Z\" fill=\"#2ca02c\"/>", "compile");
    if (!p.r.captures.empty()) item("<rect x=\"0\" y=\"-6\" width=\"16\" height=\"10\" class=\"capspan\"/>", "capture");
    if (p.summary.oom_events + p.summary.tensor_oom_events != 0) {
        item("<path d=\"M3,-5 L13,5 M3,5 L13,-5\" style=\"stroke:#d62728;stroke-width:2.5\"/>", "OOM");
    }
    if (p.summary.peak_t) item("<circle cx=\"8\" cy=\"0\" r=\"5\" class=\"peakdot\"/>", "peak");
}

std::string render_svg(Plot& p) {
    std::ostringstream& s = p.svg;
    s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << num(p.height)
      << "\" viewBox=\"0 0 " << kWidth << " " << num(p.height)
      << "\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n";
    s << "<style>\n"
         ".title{font-size:17px;font-weight:bold}.sub{font-size:13px;fill:#333}\n"
         ".frame{fill:#fff;stroke:#888}.grid{stroke:#e4e4e4}.axis{stroke:#888}\n"
         ".ytick{font-size:11px;text-anchor:end;fill:#444}.xtick{font-size:11px;text-anchor:middle;fill:#444}\n"
         ".label{font-size:11px;fill:#222}.legend{font-size:12px;fill:#222}\n"
         ".span{stroke:#777;stroke-width:0.5}.capspan{fill:#9467bd;opacity:0.7}.capwin{fill:#9467bd;opacity:0.12}\n"
         ".live{fill:#6baed6;fill-opacity:0.55;stroke:#08519c;stroke-width:1.5}\n"
         ".mapped{fill:none;stroke:#ff7f0e;stroke-width:1.5}\n"
         ".tensor{fill:none;stroke:#2ca02c;stroke-width:1.5}\n"
         ".reserved{fill:none;stroke:#7f7f7f;stroke-width:1.2;stroke-dasharray:6 3}\n"
         ".gc line{stroke:#555;stroke-width:1;stroke-dasharray:3 2}.gc_memguard line{stroke:#d62728;stroke-width:2}\n"
         ".gclabel{font-size:11px;fill:#d62728}.compile path{fill:#2ca02c}.oom path{stroke:#d62728;stroke-width:2.5}\n"
         ".peak circle,.peakdot{fill:#d62728;stroke:#fff;stroke-width:1.5}.leader{stroke:#d62728;stroke-width:1}\n"
         ".note{fill:#fff;fill-opacity:0.92;stroke:#d62728}.notehead{font-size:13px;font-weight:bold;fill:#d62728}\n"
         ".notetext{font-size:12px;fill:#222}.oomlabel{font-size:11px;fill:#d62728;font-weight:bold}\n"
         ".compilelabel{font-size:10px;fill:#2ca02c}.range{stroke-dasharray:4 2}\n"
         "</style>\n";
    s << "<rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>\n";
    title(p);
    axes(p);
    lanes(p);
    series(p);
    peak(p);
    events(p);
    legend(p);
    s << "</svg>\n";
    return s.str();
}

std::string render_html(const report::Report& r, const std::string& svg) {
    std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memguard: " +
                      xml(r.path) +
                      "</title>\n<style>body{margin:16px;background:#fafafa;font-family:sans-serif}"
                      "svg g:hover rect,svg g:hover path,svg g:hover line{filter:brightness(0.85)}</style>\n"
                      "</head>\n<body>\n";
    out += svg;
    out += "<p>Hover over a phase, capture, collection, compile, OOM mark or the peak for its figures.</p>\n"
           "</body>\n</html>\n";
    return out;
}

}  // namespace

int run_plot(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    Plot p(r);
    prepare(p, args.frames);
    std::string svg = render_svg(p);
    std::cout.flush();
    bool to_stdout = write_output_file(args.output, args.format == Args::Html ? render_html(r, svg) : svg);
    print_to(to_stdout ? stderr : stdout, "wrote %s\n", output_name(args.output).c_str());
    return kExitOk;
}

}  // namespace memguard::cli

// memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N] [--frames K] [--json]
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "report/json.h"
#include "report/symbolizer.h"
#include "report/units.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

/// Everything `top` prints: the moment, the sites shown and their frames.
struct TopView {
    report::LiveSet live;
    report::SiteTable table;
    bool has_peak = true;  // false when --at peak and GPU memory was never live
    std::vector<const report::Site*> shown;
    std::vector<std::vector<report::Frame>> frames;  // per shown site
};

const report::Stack* find_stack(const report::Report& r, uint32_t id) {
    auto it = r.stacks.find(id);
    return it == r.stacks.end() ? nullptr : &it->second;
}

report::SymbolizerOptions symbolizer_options() {
    report::SymbolizerOptions o;
    if (const char* a2l = std::getenv("MEMGUARD_ADDR2LINE")) o.addr2line = a2l;
    return o;
}

TopView build_view(const report::Report& r, const Args& args) {
    TopView v;
    v.live = report::live_at(r, args.at);
    v.has_peak = args.at.type != report::TimePoint::Peak || report::summarize(r).peak_t.has_value();
    v.table = report::group_by_site(r, v.live, args.kind);
    std::vector<const report::Stack*> stacks;
    for (size_t i = 0; i < v.table.sites.size() && i < args.top_n; ++i) {
        v.shown.push_back(&v.table.sites[i]);
        if (const report::Stack* s = find_stack(r, v.table.sites[i].stack_id)) stacks.push_back(s);
    }
    report::Symbolizer sym(r, symbolizer_options());
    sym.prepare(stacks, args.frames);
    for (const report::Site* site : v.shown) {
        const report::Stack* s = find_stack(r, site->stack_id);
        v.frames.push_back(s ? sym.frames(*s, args.frames) : std::vector<report::Frame>{});
    }
    print_warnings(sym.take_warnings());
    return v;
}

std::string basename(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string location(const std::string& function, const std::string& file, int line) {
    std::string out = function.empty() ? "??" : function;
    if (!file.empty()) out += " at " + file + (line > 0 ? ":" + std::to_string(line) : "");
    return out;
}

std::string frame_text(const report::Frame& f) {
    if (f.module == nullptr) return hex(f.ip);
    std::string module = basename(f.module->path);
    if (f.function.empty()) return module + "+" + hex(f.offset);
    return location(f.function, f.file, f.line) + " (" + module + ")";
}

std::string what_text(report::KindFilter kind) {
    switch (kind) {
    case report::KindFilter::Gpu: return "Live GPU memory";
    case report::KindFilter::Pinned: return "Live pinned host memory";
    case report::KindFilter::All: return "Live GPU and pinned host memory";
    }
    return "Live memory";
}

std::string when_text(const Args& args, const TopView& v) {
    std::string t = "t=" + report::seconds_fixed3(v.live.t) + " s";
    switch (args.at.type) {
    case report::TimePoint::Peak:
        if (!v.has_peak) return "at peak (GPU memory was never live)";
        return std::string(args.kind == report::KindFilter::Gpu ? "at peak" : "at the GPU peak") + " (" + t + ")";
    case report::TimePoint::Exit: return "at exit (" + t + ")";
    case report::TimePoint::Time: return "at " + t;
    }
    return t;
}

std::string plural(uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

void print_site_frames(const report::Report& r, const report::Site& site, const std::vector<report::Frame>& frames) {
    const report::Stack* s = find_stack(r, site.stack_id);
    if (site.stack_id == 0) std::printf("      (no stack recorded)\n");
    if (site.stack_id != 0 && s == nullptr) std::printf("      (stack %u is not in the report)\n", site.stack_id);
    if (s != nullptr && s->ips.empty()) std::printf("      (empty stack)\n");
    for (size_t i = 0; i < frames.size(); ++i) {
        std::printf("      #%-2zu %s\n", i, frame_text(frames[i]).c_str());
        for (const report::SourceLocation& loc : frames[i].inlined_by) {
            std::printf("          inlined into %s\n", location(loc.function, loc.file, loc.line).c_str());
        }
    }
    if (s != nullptr && s->ips.size() > frames.size()) {
        std::printf("      ... %s\n", plural(s->ips.size() - frames.size(), "more frame", "more frames").c_str());
    }
}

void print_rest(const TopView& v) {
    uint64_t bytes = 0, blocks = 0;
    for (size_t i = v.shown.size(); i < v.table.sites.size(); ++i) {
        bytes += v.table.sites[i].bytes;
        blocks += v.table.sites[i].blocks;
    }
    size_t rest = v.table.sites.size() - v.shown.size();
    if (rest == 0) return;
    std::printf("\n%s: %s (%s) in %s\n", plural(rest, "more site", "more sites").c_str(), human_bytes(bytes).c_str(),
                report::percent(bytes, v.table.total_bytes).c_str(), plural(blocks, "block", "blocks").c_str());
}

void print_text(const report::Report& r, const Args& args, const TopView& v) {
    std::printf("%s %s: ", what_text(args.kind).c_str(), when_text(args, v).c_str());
    if (v.table.total_blocks == 0) {
        std::printf("nothing live\n");
        return;
    }
    std::printf("%s in %s from %s\n", human_bytes(v.table.total_bytes).c_str(),
                plural(v.table.total_blocks, "block", "blocks").c_str(),
                plural(v.table.sites.size(), "site", "sites").c_str());
    for (size_t i = 0; i < v.shown.size(); ++i) {
        const report::Site& site = *v.shown[i];
        std::printf("\n#%-3zu %10s %7s  %s  (stack %u)\n", i + 1, human_bytes(site.bytes).c_str(),
                    report::percent(site.bytes, v.table.total_bytes).c_str(),
                    plural(site.blocks, "block", "blocks").c_str(), site.stack_id);
        print_site_frames(r, site, v.frames[i]);
    }
    print_rest(v);
}

void json_string_or_null(report::JsonWriter& j, const char* key, const std::string& s) {
    j.key(key);
    if (s.empty()) {
        j.null();
    } else {
        j.value(s);
    }
}

void json_location(report::JsonWriter& j, const std::string& function, const std::string& file, int line) {
    json_string_or_null(j, "function", function);
    json_string_or_null(j, "file", file);
    j.key("line");
    if (line > 0) {
        j.value(line);
    } else {
        j.null();
    }
}

void json_frame(report::JsonWriter& j, const report::Frame& f) {
    j.begin_object();
    j.key("ip").value(hex(f.ip));
    json_string_or_null(j, "module", f.module ? f.module->path : "");
    json_string_or_null(j, "offset", f.module ? hex(f.offset) : "");
    json_location(j, f.function, f.file, f.line);
    j.key("inlined_by").begin_array();
    for (const report::SourceLocation& loc : f.inlined_by) {
        j.begin_object();
        json_location(j, loc.function, loc.file, loc.line);
        j.end_object();
    }
    j.end_array();
    j.end_object();
}

std::string share(uint64_t part, uint64_t total) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", total == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(total));
    return buf;
}

void json_site(report::JsonWriter& j, const report::Report& r, const TopView& v, size_t i) {
    const report::Site& site = *v.shown[i];
    const report::Stack* s = find_stack(r, site.stack_id);
    j.begin_object();
    j.key("stack_id").value(site.stack_id);
    j.key("bytes").value(site.bytes);
    j.key("blocks").value(site.blocks);
    j.key("share").number(share(site.bytes, v.table.total_bytes));
    j.key("stack_known").value(s != nullptr);
    j.key("frames_total").value(static_cast<uint64_t>(s ? s->ips.size() : 0));
    j.key("frames").begin_array();
    for (const report::Frame& f : v.frames[i]) json_frame(j, f);
    j.end_array();
    j.end_object();
}

const char* kind_filter_name(report::KindFilter k) {
    return k == report::KindFilter::Gpu ? "gpu" : k == report::KindFilter::Pinned ? "pinned" : "all";
}

void print_json(const report::Report& r, const Args& args, const TopView& v) {
    report::JsonWriter j;
    j.begin_object();
    j.key("file").value(r.path);
    j.key("complete").value(r.complete);
    j.key("at").value(args.at_name);
    j.key("time_s");
    if (v.has_peak) {
        j.number(report::seconds_exact(v.live.t));
    } else {
        j.null();
    }
    j.key("kind").value(kind_filter_name(args.kind));
    j.key("total_bytes").value(v.table.total_bytes);
    j.key("total_blocks").value(v.table.total_blocks);
    j.key("site_count").value(static_cast<uint64_t>(v.table.sites.size()));
    j.key("sites").begin_array();
    for (size_t i = 0; i < v.shown.size(); ++i) json_site(j, r, v, i);
    j.end_array();
    j.end_object();
    std::cout << j.str();
}

}  // namespace

int run_top(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    TopView v = build_view(r, args);
    std::cout.flush();
    if (args.json) {
        print_json(r, args, v);
    } else {
        print_text(r, args, v);
    }
    return kExitOk;
}

}  // namespace memguard::cli

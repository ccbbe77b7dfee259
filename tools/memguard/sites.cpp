#include "sites.h"

#include <cstdio>
#include <cstdlib>

#include "cli.h"
#include "output.h"
#include "report/analysis.h"
#include "report/user_frame.h"

namespace memguard::cli {

namespace {

const report::Stack* find_stack(const report::Report& r, uint32_t id) {
    auto it = r.stacks.find(id);
    return it == r.stacks.end() ? nullptr : &it->second;
}

const report::PythonStack* find_python_stack(const report::Report& r, uint32_t id) {
    auto it = r.python_stacks.find(id);
    return it == r.python_stacks.end() ? nullptr : &it->second;
}

const report::PythonFrame* find_python_frame(const report::Report& r, uint32_t id) {
    auto it = r.python_frames.find(id);
    return it == r.python_frames.end() ? nullptr : &it->second;
}

std::string basename(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
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

std::string python_frame_text(const report::Report& r, uint32_t id) {
    const report::PythonFrame* p = find_python_frame(r, id);
    if (p == nullptr) return "?? (Python frame " + std::to_string(id) + " is not in the report)";
    return location(p->function, p->filename, p->line);
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
    j.key("kind").value("native");
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

void json_python_frame(report::JsonWriter& j, const report::Report& r, uint32_t id) {
    const report::PythonFrame* p = find_python_frame(r, id);
    j.begin_object();
    j.key("kind").value("python");
    j.key("frame_id").value(id);
    if (p != nullptr) {
        json_location(j, p->function, p->filename, p->line);
    } else {
        json_location(j, "", "", 0);
    }
    j.end_object();
}

/// The frame that names the site, and how it was found.
struct SiteUser {
    report::UserFrame frame;
    bool attributed = false;  // a backward() call that ran the site's allocations, not its own stack
};

SiteUser site_user(const SiteFrames& s, const report::Report& r) {
    SiteUser out;
    const report::FrameRule rule(r);
    if (s.python_stack != nullptr) {
        out.frame = report::user_frame(r, *s.python_stack, rule);
        return out;
    }
    if (s.python_stack_id != 0) return out;
    auto it = r.backward_sites.find(s.stack_id);
    if (it == r.backward_sites.end()) return out;
    out.frame = report::user_frame(r, it->second, rule);
    out.attributed = out.frame.found;
    return out;
}

std::string site_user_text(const SiteUser& u) {
    if (u.attributed) return "backward of " + report::user_frame_text(u.frame);
    return report::user_frame_text(u.frame);
}

}  // namespace

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string plural(uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

size_t SiteSymbolizer::add(uint32_t stack_id, uint32_t python_stack_id) {
    SiteFrames s;
    s.stack_id = stack_id;
    s.python_stack_id = python_stack_id;
    s.stack = find_stack(report_, stack_id);
    s.python_stack = python_stack_id == 0 ? nullptr : find_python_stack(report_, python_stack_id);
    if (s.python_stack != nullptr) {
        const std::vector<uint32_t>& ids = s.python_stack->frames;
        s.python.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), max_frames_)));
    }
    sites_.push_back(std::move(s));
    return sites_.size() - 1;
}

void SiteSymbolizer::resolve() {
    std::vector<const report::Stack*> stacks;
    for (const SiteFrames& s : sites_) {
        if (s.stack != nullptr) stacks.push_back(s.stack);
    }
    if (stacks.empty()) return;
    report::Symbolizer sym(report_, symbolizer_options());
    sym.prepare(stacks, max_frames_);
    for (SiteFrames& s : sites_) {
        if (s.stack != nullptr) s.native = sym.frames(*s.stack, max_frames_);
    }
    print_warnings(sym.take_warnings());
}

std::string format_note(const report::Report& r, int minor) {
    if (r.format_minor >= minor) return "";
    return " (format 1." + std::to_string(r.format_minor) + " does not record them)";
}

std::string site_ids_text(uint32_t stack_id, uint32_t python_stack_id) {
    std::string out = "(stack " + std::to_string(stack_id);
    if (python_stack_id != 0) out += ", Python stack " + std::to_string(python_stack_id);
    return out + ")";
}

void print_site_frames(const SiteFrames& s, const report::Report& r) {
    const SiteUser u = site_user(s, r);
    if (u.frame.found) {
        print("      user %s%s\n", site_user_text(u).c_str(),
              u.attributed ? " (attributed: allocated on autograd's thread, which has no Python stack)" : "");
    } else if (s.python_stack != nullptr) {
        print("      user (no user frame: every Python frame is PyTorch, a library or generated code)\n");
    }
    if (s.python_stack_id != 0 && s.python_stack == nullptr) {
        print("      (Python stack %u is not in the report)\n", s.python_stack_id);
    }
    for (size_t i = 0; i < s.python.size(); ++i) {
        print("      py#%-2zu %s\n", i, python_frame_text(r, s.python[i]).c_str());
    }
    if (s.python_stack != nullptr && s.python_stack->frames.size() > s.python.size()) {
        print("      ... %s\n",
              plural(s.python_stack->frames.size() - s.python.size(), "more Python frame", "more Python frames")
                  .c_str());
    }
    if (s.stack_id == 0) print("      (no stack recorded)\n");
    if (s.stack_id != 0 && s.stack == nullptr) print("      (stack %u is not in the report)\n", s.stack_id);
    if (s.stack != nullptr && s.stack->ips.empty()) print("      (empty stack)\n");
    for (size_t i = 0; i < s.native.size(); ++i) {
        print("      #%-2zu %s\n", i, frame_text(s.native[i]).c_str());
        for (const report::SourceLocation& loc : s.native[i].inlined_by) {
            print("          inlined into %s\n", location(loc.function, loc.file, loc.line).c_str());
        }
    }
    if (s.stack != nullptr && s.stack->ips.size() > s.native.size()) {
        print("      ... %s\n", plural(s.stack->ips.size() - s.native.size(), "more frame", "more frames").c_str());
    }
}

std::string site_key(const SiteFrames& s, const report::Report& r) {
    std::string key;
    for (uint32_t id : s.python) key += "py " + python_frame_text(r, id) + "\n";
    for (const report::Frame& f : s.native) {
        if (f.module == nullptr) {
            key += "? " + hex(f.ip) + "\n";  // outside every module: only the address identifies it
        } else if (f.function.empty()) {
            key += basename(f.module->path) + "+" + hex(f.offset) + "\n";
        } else {
            key += basename(f.module->path) + " " + f.function + "\n";
        }
    }
    if (key.empty()) key = s.stack_id == 0 ? "(no stack)" : "(stack " + std::to_string(s.stack_id) + ")";
    return key;
}

std::string site_label(const SiteFrames& s, const report::Report& r) {
    const SiteUser u = site_user(s, r);
    if (u.frame.found && u.attributed) return site_user_text(u) + " (attributed)";
    if (u.frame.found) {
        // Sites under one user line differ by what the line called: name the innermost function
        // that is not memguard's own (an out-of-memory's stack is taken inside memguard's observer).
        std::string label = site_user_text(u);
        const report::FrameRule rule(r);
        const report::PythonFrame* inner = nullptr;
        for (size_t i = 0; i < u.frame.index && i < s.python_stack->frames.size(); ++i) {
            const report::PythonFrame* f = find_python_frame(r, s.python_stack->frames[i]);
            if (f != nullptr && rule.classify(f->filename) != report::FrameOrigin::Memguard) {
                inner = f;
                break;
            }
        }
        if (inner != nullptr && !inner->function.empty()) label += " via " + inner->function;
        return label;
    }
    if (s.python_stack != nullptr && !s.python_stack->frames.empty()) {
        return python_frame_text(r, s.python_stack->frames.front()) + " (no user frame)";
    }
    for (const report::Frame& f : s.native) {
        std::string module = f.module ? basename(f.module->path) : "";
        bool allocator = module.find("libmemguard") != std::string::npos ||
                         module.find("libcudart") != std::string::npos ||
                         module.find("libc10_cuda") != std::string::npos;
        if (!allocator) return frame_text(f);
    }
    if (!s.native.empty()) return frame_text(s.native.front());
    return s.stack_id == 0 ? "(no stack)" : "(stack " + std::to_string(s.stack_id) + ")";
}

std::string site_user_line(const SiteFrames& s, const report::Report& r) {
    const SiteUser u = site_user(s, r);
    return u.frame.found ? site_user_text(u) : std::string();
}

void json_site_frames(report::JsonWriter& j, const SiteFrames& s, const report::Report& r) {
    const SiteUser u = site_user(s, r);
    j.key("user_frame");
    if (u.frame.found) {
        j.begin_object();
        json_location(j, u.frame.function, u.frame.file, u.frame.line);
        j.key("compiled").value(u.frame.compiled);
        j.key("attribution");
        if (u.attributed) {
            j.value("backward");
        } else {
            j.null();
        }
        j.end_object();
    } else {
        j.null();
    }
    j.key("stack_known").value(s.stack != nullptr);
    j.key("frames_total").value(static_cast<uint64_t>(s.stack ? s.stack->ips.size() : 0));
    j.key("python_frames_total").value(static_cast<uint64_t>(s.python_stack ? s.python_stack->frames.size() : 0));
    j.key("frames").begin_array();
    for (uint32_t id : s.python) json_python_frame(j, r, id);
    for (const report::Frame& f : s.native) json_frame(j, f);
    j.end_array();
}

report::SiteTable site_table_at_peak(const report::Report& r, bool tensors, const report::Summary* known) {
    const report::TimePoint peak{report::TimePoint::Peak, 0};
    return tensors ? report::group_tensors_by_site(r, report::tensors_live_at(r, peak, nullptr, known))
                   : report::group_by_site(r, report::live_at(r, peak, known), report::KindFilter::Gpu);
}

PeakSite top_site_at_peak(const report::Report& r, size_t max_frames, const report::Summary* known) {
    PeakSite out;
    report::SiteTable table = site_table_at_peak(r, !r.tensors.empty(), known);
    if (table.sites.empty()) return out;
    SiteSymbolizer sym(r, max_frames);
    size_t h = sym.add(table.sites[0].stack_id, table.sites[0].python_stack_id);
    sym.resolve();
    out.label = site_label(sym.get(h), r);
    out.bytes = table.sites[0].bytes;
    out.total_bytes = table.total_bytes;
    return out;
}

}  // namespace memguard::cli

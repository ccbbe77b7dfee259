#include "report/symbolizer.h"

#include <cxxabi.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/text.h"
#include "report/elf_file.h"
#include "report/subprocess.h"

namespace memguard::report {

struct Symbolizer::ModuleState {
    bool opened = false;
    std::unique_ptr<ElfFile> elf;  // null when the file is missing, unreadable or a different build
    std::set<uint64_t> queried;                              // file addresses given to addr2line
    std::map<uint64_t, std::vector<SourceLocation>> lines;  // its answers, by file address
};

std::string demangle(const std::string& name) {
    if (name.rfind("_Z", 0) != 0) return name;
    int status = 0;
    char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (status != 0 || out == nullptr) return name;
    std::string result = out;
    std::free(out);
    return result;
}

namespace {

bool parse_address_line(const std::string& line, uint64_t& addr) {
    if (line.size() < 3 || line[0] != '0' || line[1] != 'x') return false;
    auto v = text::parse_hex(std::string_view(line).substr(2));
    if (!v) return false;
    addr = *v;
    return true;
}

/// "file:line", "file:line (discriminator N)", "??:0" or "??:?".
void parse_location(std::string loc, SourceLocation& out) {
    size_t paren = loc.find(" (discriminator ");
    if (paren != std::string::npos) loc.erase(paren);
    size_t colon = loc.rfind(':');
    std::string file = colon == std::string::npos ? loc : loc.substr(0, colon);
    if (file != "??") out.file = file;
    if (colon == std::string::npos) return;
    auto line = text::parse_dec(std::string_view(loc).substr(colon + 1));
    out.line = line && *line <= 0x7fffffff ? static_cast<int>(*line) : 0;
}

std::string hex_addr(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

std::map<uint64_t, std::vector<SourceLocation>> parse_addr2line_output(const std::string& output) {
    std::map<uint64_t, std::vector<SourceLocation>> out;
    std::vector<SourceLocation>* current = nullptr;
    size_t pos = 0;
    std::string pending_function;
    bool have_function = false;
    while (pos < output.size()) {
        size_t nl = output.find('\n', pos);
        if (nl == std::string::npos) nl = output.size();
        std::string line = output.substr(pos, nl - pos);
        pos = nl + 1;
        uint64_t addr = 0;
        if (!have_function && parse_address_line(line, addr)) {
            current = &out[addr];
            continue;
        }
        if (current == nullptr) continue;
        if (!have_function) {
            pending_function = line == "??" ? "" : line;
            have_function = true;
            continue;
        }
        SourceLocation loc;
        loc.function = std::move(pending_function);
        parse_location(line, loc);
        current->push_back(std::move(loc));
        have_function = false;
    }
    return out;
}

Symbolizer::Symbolizer(const Report& report, SymbolizerOptions options)
    : report_(report), options_(std::move(options)) {
    addr2line_path_ = find_program(options_.addr2line);
}

Symbolizer::~Symbolizer() = default;

const Module* Symbolizer::find_module(uint64_t ip, size_t modules_known) const {
    const std::vector<Module>& mods = report_.modules;
    for (size_t i = std::min(modules_known, mods.size()); i-- > 0;) {
        if (mods[i].lo <= ip && ip < mods[i].hi) return &mods[i];
    }
    for (size_t i = mods.size(); i-- > 0;) {  // a module announced after the stack: tolerated
        if (mods[i].lo <= ip && ip < mods[i].hi) return &mods[i];
    }
    return nullptr;
}

Symbolizer::ModuleState& Symbolizer::state(const Module& m) {
    std::unique_ptr<ModuleState>& slot = states_[m.id];
    if (!slot) slot = std::make_unique<ModuleState>();
    ModuleState& st = *slot;
    if (st.opened) return st;
    st.opened = true;
    struct stat sb {};
    if (stat(m.path.c_str(), &sb) != 0 && (errno == ENOENT || errno == ENOTDIR)) return st;  // not on this machine
    std::string error;
    std::unique_ptr<ElfFile> elf = ElfFile::open(m.path, error);
    if (!elf) {
        warnings_.push_back(m.path + ": cannot read (" + error + "); its frames are not symbolized");
        return st;
    }
    if (!m.build_id.empty() && elf->build_id() != m.build_id) {
        warnings_.push_back(m.path + ": GNU build-id " + (elf->build_id().empty() ? "absent" : elf->build_id()) +
                            " differs from the recorded " + m.build_id + " (file changed since the run?); its frames "
                            "are not symbolized");
        return st;
    }
    st.elf = std::move(elf);
    return st;
}

void Symbolizer::run_addr2line(const Module& m, ModuleState& st, const std::vector<uint64_t>& addrs) {
    if (addr2line_path_.empty() || !st.elf || !st.elf->has_debug_line()) return;
    std::string input, output;
    for (uint64_t a : addrs) {
        if (st.queried.insert(a).second) input += hex_addr(a) + "\n";
    }
    if (input.empty()) return;
    std::vector<std::string> argv = {addr2line_path_, "-e", m.path, "-a", "-f", "-C", "-i"};
    if (!run_program(argv, input, output)) {
        warnings_.push_back(addr2line_path_ + " failed on " + m.path + "; frames show without file:line");
    }
    for (auto& [addr, locs] : parse_addr2line_output(output)) st.lines[addr] = std::move(locs);
}

void Symbolizer::prepare(const std::vector<const Stack*>& stacks, size_t max_frames) {
    std::map<const Module*, std::set<uint64_t>> wanted;
    for (const Stack* s : stacks) {
        for (size_t i = 0; i < s->ips.size() && i < max_frames; ++i) {
            const Module* m = find_module(s->ips[i], s->modules_known);
            if (m != nullptr && s->ips[i] - m->bias > 0) wanted[m].insert(s->ips[i] - m->bias - 1);
        }
    }
    for (const auto& [m, addrs] : wanted) {
        run_addr2line(*m, state(*m), std::vector<uint64_t>(addrs.begin(), addrs.end()));
    }
}

Frame Symbolizer::frame(uint64_t ip, size_t modules_known) {
    Frame f;
    f.ip = ip;
    f.module = find_module(ip, modules_known);
    if (f.module == nullptr) return f;
    f.offset = ip - f.module->bias;
    ModuleState& st = state(*f.module);
    if (!st.elf || f.offset == 0) return f;
    uint64_t lookup = f.offset - 1;  // a return address: the call is the instruction before it
    if (auto name = st.elf->function_at(lookup)) f.function = demangle(*name);
    run_addr2line(*f.module, st, {lookup});  // nothing to do when prepare() covered it
    auto it = st.lines.find(lookup);
    if (it == st.lines.end() || it->second.empty()) return f;
    const SourceLocation& inner = it->second.front();
    if (!inner.function.empty()) f.function = inner.function;
    f.file = inner.file;
    f.line = inner.line;
    f.inlined_by.assign(it->second.begin() + 1, it->second.end());
    return f;
}

std::vector<Frame> Symbolizer::frames(const Stack& stack, size_t max_frames) {
    std::vector<Frame> out;
    for (size_t i = 0; i < stack.ips.size() && i < max_frames; ++i) {
        out.push_back(frame(stack.ips[i], stack.modules_known));
    }
    return out;
}

std::vector<std::string> Symbolizer::take_warnings() {
    std::vector<std::string> out;
    out.swap(warnings_);
    return out;
}

}  // namespace memguard::report

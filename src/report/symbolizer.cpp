#include "report/symbolizer.h"

#include <cxxabi.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /// Function names: the module file, or its debug file when that has the .symtab. Null when
    /// neither exists, can be read or has the recorded build-id.
    std::shared_ptr<const ElfFile> elf;
    std::shared_ptr<const ElfFile> line_file;               // what addr2line reads (has .debug_line), or null
    std::set<uint64_t> queried;                             // file addresses given to addr2line
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

void Symbolizer::warn(std::string message) {
    if (warned_.insert(message).second) warnings_.push_back(std::move(message));
}

std::shared_ptr<const ElfFile> Symbolizer::open_file(const std::string& root, const std::string& path,
                                                     const std::string& shown, bool& missing) {
    missing = false;
    std::string error;
    int err = 0;
    int fd = ElfFile::open_regular(root, path, error, err);
    if (fd < 0) {
        missing = err == ENOENT || err == ENOTDIR;  // not on this machine: no remark
        if (!missing) warn(shown + ": cannot read (" + error + "); its frames are not symbolized");
        return nullptr;
    }
    // Many modules (or many M records of one report) may name one file: it is mapped and read once.
    struct stat st {};
    if (fstat(fd, &st) == 0) {
        auto cached = files_.find({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
        if (cached != files_.end()) {
            ::close(fd);
            return cached->second;
        }
    }
    if (files_.size() >= kMaxFiles) {
        ::close(fd);
        if (!too_many_files_) {
            warn("more than " + std::to_string(kMaxFiles) +
                 " module files: the frames of the others are not "
                 "symbolized");
        }
        too_many_files_ = true;
        return nullptr;
    }
    std::shared_ptr<const ElfFile> elf = ElfFile::map(fd, error);
    if (!elf) {
        warn(shown + ": cannot read (" + error + "); its frames are not symbolized");
        return nullptr;
    }
    files_.emplace(elf->file_id(), elf);
    return elf;
}

Symbolizer::ModuleState& Symbolizer::state(const Module& m) {
    std::unique_ptr<ModuleState>& slot = states_[m.id];
    if (!slot) slot = std::make_unique<ModuleState>();
    ModuleState& st = *slot;
    if (st.opened) return st;
    st.opened = true;
    std::string shown = m.path;
    if (!options_.sysroot.empty()) {
        std::string root = options_.sysroot;
        while (root.size() > 1 && root.back() == '/') root.pop_back();
        shown = root + (m.path.rfind('/', 0) == 0 ? "" : "/") + m.path;
    }
    bool missing = false;
    std::shared_ptr<const ElfFile> file = open_file(options_.sysroot, m.path, shown, missing);
    if (file && !m.build_id.empty() && file->build_id() != m.build_id) {
        warn(shown + ": GNU build-id " + (file->build_id().empty() ? "absent" : file->build_id()) +
             " differs from the recorded " + m.build_id +
             " (file changed since the run?); its frames are not "
             "symbolized");
        file = nullptr;
    }
    // A separate debug file, as GDB finds it: by build-id (hex, so it names no other directory).
    std::shared_ptr<const ElfFile> debug;
    if (!options_.debug_dir.empty() && m.build_id.size() > 2) {
        const std::string path = options_.debug_dir + "/.build-id/" + m.build_id.substr(0, 2) + "/" +
                                 m.build_id.substr(2) + ".debug";
        debug = open_file("", path, path, missing);
        if (debug && debug->build_id() != m.build_id) {
            warn(path + ": GNU build-id " + (debug->build_id().empty() ? "absent" : debug->build_id()) +
                 " differs from the recorded " + m.build_id + "; not used");
            debug = nullptr;
        }
    }
    st.elf = debug && debug->has_symtab() ? debug : file ? file : debug;
    st.line_file = debug && debug->has_debug_line() ? debug : file && file->has_debug_line() ? file : nullptr;
    return st;
}

void Symbolizer::run_addr2line(const Module& m, ModuleState& st, const std::vector<uint64_t>& addrs) {
    if (addr2line_path_.empty() || !st.line_file) return;
    std::string input, output;
    for (uint64_t a : addrs) {
        if (st.queried.insert(a).second) input += hex_addr(a) + "\n";
    }
    if (input.empty()) return;
    // The file checked, by its descriptor: the path may name another file by now.
    std::vector<std::string> argv = {addr2line_path_, "-e", st.line_file->fd_path(), "-a", "-f", "-C", "-i"};
    if (!run_program(argv, input, output, st.line_file->fd())) {
        warn(addr2line_path_ + " failed on " + m.path + "; frames show without file:line");
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

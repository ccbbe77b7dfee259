#include "test_support.h"

#include "format/binary.h"
#include "report/transcode.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace preload_test {

namespace report = memguard::report;

// ---- paths --------------------------------------------------------------------------------------

std::string Paths::app(const std::string& name) {
    static const std::map<std::string, std::string> apps = {
        {"alloc_kinds", APP_ALLOC_KINDS},
        {"oom", APP_OOM},
        {"threads", APP_THREADS},
        {"dlopen_local", APP_DLOPEN_LOCAL},
        {"fork", APP_FORK},
        {"fork_exec", APP_FORK_EXEC},
        {"killed", APP_KILLED},
        {"noop", APP_NOOP},
        {"exit_code", APP_EXIT_CODE},
        {"bounded_churn", APP_BOUNDED_CHURN},
        {"graph_pool", APP_GRAPH_POOL},
        {"unsafe_calls", APP_UNSAFE_CALLS},
        {"free_live_graph", APP_FREE_LIVE_GRAPH},
        {"warmup", APP_WARMUP},
        {"many_captures", APP_MANY_CAPTURES},
        {"capture_misuse", APP_CAPTURE_MISUSE},
        {"nvtx_phases", APP_NVTX_PHASES},
        {"pluggable_alloc", APP_PLUGGABLE_ALLOC},
        {"dlopen_memguard", APP_DLOPEN_MEMGUARD},
    };
    auto it = apps.find(name);
    if (it == apps.end()) throw std::runtime_error("unknown test application " + name);
    return it->second;
}

// ---- files --------------------------------------------------------------------------------------

namespace {

void remove_tree(const std::string& path) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path.c_str(), 0700);  // tests make directories unwritable
        for (const std::string& name : list_dir(path)) remove_tree(path + "/" + name);
        rmdir(path.c_str());
    } else {
        unlink(path.c_str());
    }
}

bool is_report_name(const std::string& name) {
    static const std::regex pattern(R"(.*\.mgr(\.[0-9]+)?)");
    return std::regex_match(name, pattern);
}

}  // namespace

TempDir::TempDir(const std::string& label) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/memguard-preload-" + label +
                          "-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (mkdtemp(buffer.data()) == nullptr) {
        throw std::runtime_error("mkdtemp(" + pattern + ") failed: " + std::strerror(errno));
    }
    path_ = buffer.data();
}

TempDir::~TempDir() {
    if (!keep_) remove_tree(path_);
}

void make_dir(const std::string& path, unsigned mode) {
    if (mkdir(path.c_str(), mode) != 0) {
        throw std::runtime_error("mkdir(" + path + ") failed: " + std::strerror(errno));
    }
    chmod(path.c_str(), mode);  // whatever the umask
}

void write_file(const std::string& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

bool exists(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
    std::vector<std::string> names;
    DIR* handle = opendir(dir.c_str());
    if (handle == nullptr) return names;
    while (dirent* entry = readdir(handle)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..") names.push_back(name);
    }
    closedir(handle);
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<std::string> find_reports(const std::string& dir) {
    std::vector<std::string> found;
    for (const std::string& name : list_dir(dir)) {
        std::string path = dir + "/" + name;
        struct stat st;
        if (lstat(path.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            for (std::string& nested : find_reports(path)) found.push_back(std::move(nested));
        } else if (S_ISREG(st.st_mode) && is_report_name(name)) {
            found.push_back(path);
        }
    }
    return found;
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string real_path(const std::string& path) {
    char buffer[PATH_MAX];
    return realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : path;
}

// ---- the application log ------------------------------------------------------------------------

uint64_t AppLog::value(const std::string& key) const {
    auto it = info.find(key);
    if (it == info.end()) throw std::runtime_error("the application logged no 'info " + key + "'");
    return it->second;
}

namespace {

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> fields;
    std::istringstream in(line);
    std::string field;
    while (in >> field) fields.push_back(field);
    return fields;
}

uint64_t parse_number(const std::string& text, const std::string& line) {
    bool is_hex = text.rfind("0x", 0) == 0;
    std::string digits = is_hex ? text.substr(2) : text;
    try {
        size_t used = 0;
        uint64_t value = std::stoull(digits, &used, is_hex ? 16 : 10);
        if (used != digits.size()) throw std::invalid_argument(text);
        return value;
    } catch (const std::exception&) {
        throw std::runtime_error("malformed number '" + text + "' in application log line: " + line);
    }
}

std::optional<uint64_t> parse_stream(const std::string& text, const std::string& line) {
    if (text == "-") return std::nullopt;
    return parse_number(text, line);
}

}  // namespace

AppLog parse_app_log(const std::string& out) {
    AppLog log;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> f = split(line);
        if (f.empty()) continue;
        auto need = [&](size_t count) {
            if (f.size() != count) throw std::runtime_error("malformed application log line: " + line);
        };
        if (f[0] == "alloc") {
            need(7);
            log.events.push_back({LogEvent::Alloc, log.allocs.size()});
            log.allocs.push_back({f[1], parse_number(f[2], line), parse_number(f[3], line), parse_stream(f[4], line),
                                  std::stoi(f[5]), f[6]});
        } else if (f[0] == "free") {
            need(4);
            log.events.push_back({LogEvent::Free, log.frees.size()});
            log.frees.push_back({f[1], parse_number(f[2], line), parse_stream(f[3], line)});
        } else if (f[0] == "failed") {
            need(7);
            log.failures.push_back(
                {f[1], parse_number(f[2], line), std::stoi(f[3]), parse_number(f[4], line), std::stoi(f[5]), f[6]});
        } else if (f[0] == "info") {
            need(3);
            log.info.emplace(f[1], parse_number(f[2], line));
        }
    }
    return log;
}

std::string normalize_addresses(const std::string& text) {
    static const std::regex address("0x[0-9a-fA-F]+");
    return std::regex_replace(text, address, "0xADDR");
}

std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(prefix, 0) == 0) lines.push_back(line);
    }
    return lines;
}

std::vector<std::string> lines_containing(const std::string& text, const std::string& needle) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.find(needle) != std::string::npos) lines.push_back(line);
    }
    return lines;
}

// ---- reports ------------------------------------------------------------------------------------

report::Kind kind_of_api(const std::string& api) {
    if (api == "cudaMalloc" || api == "cudaMallocPitch") return report::Kind::Device;
    if (api == "cudaMallocAsync" || api == "cudaMallocFromPoolAsync") return report::Kind::Async;
    if (api == "cudaMallocManaged") return report::Kind::Managed;
    if (api == "cudaMallocHost" || api == "cudaHostAlloc") return report::Kind::Pinned;
    throw std::runtime_error("not an allocating API: " + api);
}

std::string report_text(const std::string& path) {
    std::string content = read_file(path);
    if (content.rfind(std::string(memguard::format::kBinaryMagic) + " ", 0) != 0) return content;
    // A binary report (the library's default encoding): its records as text lines.
    std::string text;
    std::vector<std::string> warnings;
    report::transcode(path, report::Encoding::Text, text, &warnings);
    return text;
}

std::vector<std::vector<std::string>> raw_records(const std::string& path, const std::string& types) {
    std::vector<std::vector<std::string>> records;
    std::istringstream in(report_text(path));
    std::string line;
    while (std::getline(in, line)) {
        if (line.size() >= 2 && line[1] == ' ' && types.find(line[0]) != std::string::npos) {
            records.push_back(split(line));
        }
    }
    return records;
}

uint64_t live_gpu_bytes_at_exit(const report::Report& r) {
    uint64_t total = 0;
    for (const report::Block& block : r.blocks) {
        if (!block.t_free && report::is_gpu(block.kind)) total += block.size;
    }
    return total;
}

uint64_t live_pinned_bytes_at_exit(const report::Report& r) {
    uint64_t total = 0;
    for (const report::Block& block : r.blocks) {
        if (!block.t_free && block.kind == report::Kind::Pinned) total += block.size;
    }
    return total;
}

std::vector<size_t> blocks_of_size(const report::Report& r, uint64_t size) {
    std::vector<size_t> found;
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (r.blocks[i].size == size) found.push_back(i);
    }
    return found;
}

const ElfFile* Symbolizer::elf(const std::string& path) {
    auto it = elves_.find(path);
    if (it == elves_.end()) {
        std::unique_ptr<ElfFile> file;
        try {
            file = std::make_unique<ElfFile>(ElfFile::load(path));
        } catch (const std::exception&) {
            // Unreadable or not ELF (e.g. [vdso]): its frames stay unnamed.
        }
        it = elves_.emplace(path, std::move(file)).first;
    }
    return it->second.get();
}

std::vector<Symbolizer::Frame> Symbolizer::frames(uint32_t stack_id) {
    auto cached = cache_.find(stack_id);
    if (cached != cache_.end()) return cached->second;
    std::vector<Frame> result;
    auto stack = report_.stacks.find(stack_id);
    if (stack != report_.stacks.end()) {
        for (uint64_t ip : stack->second.ips) {
            Frame frame;
            frame.ip = ip;
            for (const report::Module& module : report_.modules) {
                if (ip < module.lo || ip >= module.hi) continue;
                frame.module = module.path;
                if (const ElfFile* file = elf(module.path)) {
                    // A return address: the call is the instruction before it.
                    if (auto symbol = file->function_at(ip - module.bias - 1)) {
                        frame.function = symbol->name;
                    }
                }
                break;
            }
            result.push_back(std::move(frame));
        }
    }
    cache_[stack_id] = result;
    return result;
}

bool Symbolizer::has_function(uint32_t stack_id, const std::string& function) {
    for (const Frame& frame : frames(stack_id)) {
        if (frame.function == function) return true;
    }
    return false;
}

bool Symbolizer::has_function_in(uint32_t stack_id, const std::string& function, const std::string& module_suffix) {
    for (const Frame& frame : frames(stack_id)) {
        bool module_matches = frame.module.size() >= module_suffix.size() &&
                              frame.module.compare(frame.module.size() - module_suffix.size(), module_suffix.size(),
                                                   module_suffix) == 0;
        if (frame.function == function && module_matches) return true;
    }
    return false;
}

std::string Symbolizer::describe(uint32_t stack_id) {
    std::ostringstream text;
    text << "stack " << stack_id;
    if (report_.stacks.count(stack_id) == 0) text << " (not in the report)";
    text << ":\n";
    for (const Frame& frame : frames(stack_id)) {
        text << "    " << hex(frame.ip) << " " << (frame.function.empty() ? "?" : frame.function) << " in "
             << (frame.module.empty() ? "(no module)" : frame.module) << "\n";
    }
    return text.str();
}

std::string hex(uint64_t value) {
    std::ostringstream text;
    text << "0x" << std::hex << value;
    return text.str();
}

}  // namespace preload_test

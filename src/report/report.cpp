// The report reader: docs/report-format.md, version 1.
#include "report/report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/text.h"
#include "report/line_reader.h"
#include "report/units.h"
#include "report/warnings.h"

namespace memguard::report {

const char* kind_name(Kind k) {
    switch (k) {
    case Kind::Device: return "device";
    case Kind::Async: return "async";
    case Kind::Managed: return "managed";
    case Kind::Pinned: return "pinned";
    }
    return "unknown";
}

bool is_gpu(Kind k) { return k == Kind::Device || k == Kind::Async || k == Kind::Managed; }

namespace {

constexpr std::string_view kMagic = "MEMGUARD-REPORT";

/// A field quoted for a message: at most 40 chars, non-printable bytes as '?'.
std::string quoted(std::string_view s) {
    constexpr size_t max_len = 40;
    std::string out = "'";
    for (size_t i = 0; i < s.size() && i < max_len; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
    }
    if (s.size() > max_len) out += "...";
    return out + "'";
}

std::string hex(uint64_t v) {
    char buf[16];
    return std::string(buf, text::put_hex(buf, v));
}

void split_fields(std::string_view line, std::vector<std::string_view>& out) {
    out.clear();
    size_t start = 0;
    while (true) {
        size_t sp = line.find(' ', start);
        if (sp == std::string_view::npos) {
            out.push_back(line.substr(start));
            return;
        }
        out.push_back(line.substr(start, sp - start));
        start = sp + 1;
    }
}

/// Turns the lines of one report into a Report. Line 1 is the header; records follow.
class Parser {
public:
    explicit Parser(const std::string& name) { report_.path = name; }

    void line(std::string_view text, size_t line_no);
    [[noreturn]] void partial_last_line(std::string_view text, size_t line_no, uint64_t file_size);
    Report finish();

private:
    [[noreturn]] void fail(const std::string& what) const;
    /// "malformed <type> record: <detail>"
    [[noreturn]] void malformed(const std::string& detail) const;
    /// "malformed <type> record: bad <what> '<field i>'<note>"
    [[noreturn]] void bad_field(size_t i, const char* what, const char* note = "") const;
    void warn(const char* cls, const std::string& what);

    void header(std::string_view text);
    void record();
    void info();
    void module();
    void stack();
    void alloc();
    void free_block();
    void restore();
    void failure();
    void heartbeat();
    void end();

    void need_fields(size_t n) const;
    uint64_t hex_field(size_t i, const char* what) const;
    uint64_t dec_field(size_t i, const char* what) const;
    uint32_t id_field(size_t i, const char* what) const;
    int int_field(size_t i, const char* what) const;
    int64_t time_field(size_t i);
    std::optional<uint64_t> stream_field(size_t i) const;
    std::string string_field(size_t i, const char* what) const;
    Kind kind_field(size_t i) const;
    void check_stack_ref(uint32_t stack_id, const char* record);
    void add_event(Event::Type type, size_t block, int64_t t);
    void warn_frames_outside_modules();

    Report report_;
    Warnings warnings_;
    std::vector<std::string_view> f_;
    size_t line_no_ = 0;
    std::unordered_map<uint64_t, size_t> live_;   // addr -> block
    std::unordered_map<uint64_t, size_t> freed_;  // addr -> block most recently freed there
    int64_t max_t_ = 0;
    bool any_t_ = false;
    std::optional<int64_t> heartbeat_t_;
    std::optional<int64_t> end_t_;
};

void Parser::fail(const std::string& what) const {
    throw ReportError(report_.path + ":" + std::to_string(line_no_) + ": " + what);
}

void Parser::malformed(const std::string& detail) const {
    fail("malformed " + std::string(f_[0]) + " record: " + detail);
}

void Parser::bad_field(size_t i, const char* what, const char* note) const {
    malformed(std::string("bad ") + what + " " + quoted(f_[i]) + note);
}

void Parser::warn(const char* cls, const std::string& what) {
    warnings_.add(cls, report_.path + ":" + std::to_string(line_no_) + ": " + what);
}

void Parser::line(std::string_view text, size_t line_no) {
    line_no_ = line_no;
    if (line_no == 1) {
        header(text);
        return;
    }
    split_fields(text, f_);
    record();
}

void Parser::partial_last_line(std::string_view text, size_t line_no, uint64_t file_size) {
    line_no_ = line_no;
    if (line_no == 1) header(text);  // a wrong magic or version says more than "truncated"
    fail("truncated at byte " + std::to_string(file_size) + " (last record incomplete)");
}

void Parser::header(std::string_view text) {
    split_fields(text, f_);
    std::string expected = std::string(kMagic) + " " + std::to_string(kFormatVersion);
    if (f_[0] != kMagic || f_.size() < 2) {
        fail("not a memguard report: first line is " + quoted(text) + ", expected '" + expected + "'");
    }
    auto version = text::parse_dec(f_[1]);
    if (!version || *version > 1000000) fail("bad format version " + quoted(f_[1]) + " in the header");
    std::string reads = " this memguard reads (" + std::to_string(kFormatVersion) + ")";
    if (*version > static_cast<uint64_t>(kFormatVersion)) {
        fail("report format version " + std::to_string(*version) + " is newer than" + reads);
    }
    if (*version < static_cast<uint64_t>(kFormatVersion)) {
        fail("report format version " + std::to_string(*version) + " is not the one" + reads);
    }
    report_.version = static_cast<int>(*version);
}

void Parser::record() {
    std::string_view type = f_[0];
    if (type.size() != 1) return;  // unknown record types are ignored (format 1.x additions)
    switch (type[0]) {
    case 'I': info(); break;
    case 'M': module(); break;
    case 'S': stack(); break;
    case 'A': alloc(); break;
    case 'F': free_block(); break;
    case 'R': restore(); break;
    case 'E': failure(); break;
    case 'H': heartbeat(); break;
    case 'Z': end(); break;
    default: break;
    }
}

void Parser::need_fields(size_t n) const {
    if (f_.size() < n) {
        malformed(std::to_string(n - 1) + " fields expected, " + std::to_string(f_.size() - 1) + " found");
    }
}

uint64_t Parser::hex_field(size_t i, const char* what) const {
    auto v = text::parse_hex(f_[i]);
    if (!v) bad_field(i, what, " (hex expected)");
    return *v;
}

uint64_t Parser::dec_field(size_t i, const char* what) const {
    auto v = text::parse_dec(f_[i]);
    if (!v) bad_field(i, what);
    return *v;
}

uint32_t Parser::id_field(size_t i, const char* what) const {
    uint64_t v = dec_field(i, what);
    if (v > UINT32_MAX) malformed(std::string(what) + " " + quoted(f_[i]) + " too large");
    return static_cast<uint32_t>(v);
}

int Parser::int_field(size_t i, const char* what) const {
    auto v = text::parse_sdec(f_[i]);
    if (!v || *v < INT32_MIN || *v > INT32_MAX) bad_field(i, what);
    return static_cast<int>(*v);
}

int64_t Parser::time_field(size_t i) {
    auto v = text::parse_sdec(f_[i]);
    if (!v) bad_field(i, "time");
    if (!any_t_ || *v > max_t_) max_t_ = *v;
    any_t_ = true;
    return *v;
}

std::optional<uint64_t> Parser::stream_field(size_t i) const {
    if (f_[i] == "-") return std::nullopt;
    return hex_field(i, "stream");
}

std::string Parser::string_field(size_t i, const char* what) const {
    auto v = f_[i].empty() ? std::nullopt : text::decode(f_[i]);
    if (!v) bad_field(i, what, " (percent-encoding)");
    return *v;
}

Kind Parser::kind_field(size_t i) const {
    std::string_view k = f_[i];
    if (k == "device") return Kind::Device;
    if (k == "async") return Kind::Async;
    if (k == "managed") return Kind::Managed;
    if (k == "pinned") return Kind::Pinned;
    malformed("unknown kind " + quoted(k));
}

void Parser::info() {
    need_fields(3);
    std::string key = string_field(1, "key");
    report_.info[key] = string_field(2, "value");
}

void Parser::module() {
    need_fields(7);
    Module m;
    m.id = id_field(1, "module id");
    m.lo = hex_field(2, "lo");
    m.hi = hex_field(3, "hi");
    m.bias = hex_field(4, "bias");
    if (f_[5] != "-") {
        bool is_hex = std::all_of(f_[5].begin(), f_[5].end(), [](char c) { return text::hex_value(c) >= 0; });
        if (!is_hex || f_[5].empty()) bad_field(5, "build-id", " (hex expected)");
        if (f_[5].size() % 2 != 0) bad_field(5, "build-id", " (odd length)");
        m.build_id = std::string(f_[5]);
        std::transform(m.build_id.begin(), m.build_id.end(), m.build_id.begin(),
                       [](char c) { return static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c); });
    }
    m.path = string_field(6, "path");
    if (m.hi < m.lo) malformed("hi " + quoted(f_[3]) + " is below lo " + quoted(f_[2]));
    for (const Module& other : report_.modules) {
        if (other.id == m.id) {
            warn("dup-module", "module id " + std::to_string(m.id) + " defined twice; the second M record is ignored");
            return;
        }
    }
    report_.modules.push_back(std::move(m));
}

void Parser::stack() {
    need_fields(2);
    Stack s;
    s.id = id_field(1, "stack id");
    if (s.id == 0) malformed("stack id 0 is reserved for \"no stack\"");
    s.ips.reserve(f_.size() - 2);
    for (size_t i = 2; i < f_.size(); ++i) s.ips.push_back(hex_field(i, "ip"));
    s.modules_known = report_.modules.size();
    if (report_.stacks.count(s.id) != 0) {
        warn("dup-stack", "stack id " + std::to_string(s.id) + " defined twice; the second S record is ignored");
        return;
    }
    report_.stacks.emplace(s.id, std::move(s));
}

void Parser::check_stack_ref(uint32_t stack_id, const char* record) {
    if (stack_id != 0 && report_.stacks.count(stack_id) == 0) {
        warn("unknown-stack", std::string(record) + " record uses stack " + std::to_string(stack_id) +
                                  ", which no earlier S record defines");
    }
}

void Parser::add_event(Event::Type type, size_t block, int64_t t) { report_.events.push_back(Event{type, block, t}); }

void Parser::alloc() {
    need_fields(10);
    Block b;
    b.t_alloc = time_field(1);
    b.tid = dec_field(2, "tid");
    b.addr = hex_field(3, "address");
    b.size = dec_field(4, "size");
    b.kind = kind_field(5);
    b.api = string_field(6, "api");
    b.device = int_field(7, "device");
    b.stream = stream_field(8);
    b.stack_id = id_field(9, "stack id");
    check_stack_ref(b.stack_id, "A");
    size_t index = report_.blocks.size();
    auto old = live_.find(b.addr);
    if (old != live_.end()) {
        warn("double-alloc", "allocation at " + hex(b.addr) + ", which is already live; the earlier block is "
                             "taken as freed (a free was not recorded)");
        Block& prev = report_.blocks[old->second];
        prev.t_free = b.t_alloc;
        prev.free_api = "(implicit)";
        add_event(Event::Free, old->second, b.t_alloc);
    }
    live_[b.addr] = index;
    freed_.erase(b.addr);
    report_.blocks.push_back(std::move(b));
    add_event(Event::Alloc, index, report_.blocks.back().t_alloc);
}

void Parser::free_block() {
    need_fields(7);
    int64_t t = time_field(1);
    dec_field(2, "tid");
    uint64_t addr = hex_field(3, "address");
    dec_field(4, "size");
    std::string api = string_field(5, "api");
    stream_field(6);
    auto it = live_.find(addr);
    if (it == live_.end()) {
        warn("free-not-live", "free of " + hex(addr) + ", which is not live; ignored");
        return;
    }
    size_t index = it->second;
    live_.erase(it);
    freed_[addr] = index;
    report_.blocks[index].t_free = t;
    report_.blocks[index].free_api = std::move(api);
    add_event(Event::Free, index, t);
}

void Parser::restore() {
    need_fields(5);
    int64_t t = time_field(1);
    dec_field(2, "tid");
    uint64_t addr = hex_field(3, "address");
    int_field(4, "error");
    auto it = freed_.find(addr);
    if (it == freed_.end() || live_.count(addr) != 0) {
        warn("restore-not-freed", "failed free of " + hex(addr) + ", which no earlier free released; ignored");
        return;
    }
    size_t index = it->second;
    freed_.erase(it);
    live_[addr] = index;
    report_.blocks[index].t_free.reset();
    report_.blocks[index].free_api.clear();
    add_event(Event::Restore, index, t);
}

void Parser::failure() {
    need_fields(11);
    FailedAlloc e;
    e.t = time_field(1);
    e.tid = dec_field(2, "tid");
    e.size = dec_field(3, "size");
    e.kind = kind_field(4);
    e.api = string_field(5, "api");
    e.device = int_field(6, "device");
    e.stream = stream_field(7);
    e.stack_id = id_field(8, "stack id");
    e.error = int_field(9, "error");
    e.live_bytes = dec_field(10, "live bytes");
    check_stack_ref(e.stack_id, "E");
    report_.failures.push_back(std::move(e));
}

void Parser::heartbeat() {
    need_fields(2);
    heartbeat_t_ = time_field(1);
}

void Parser::end() {
    need_fields(2);
    int64_t t = time_field(1);
    if (!end_t_) end_t_ = t;
    report_.complete = true;
}

void Parser::warn_frames_outside_modules() {
    size_t outside = 0, total = 0;
    for (const auto& [id, s] : report_.stacks) {
        for (uint64_t ip : s.ips) {
            ++total;
            bool inside = false;
            for (size_t m = 0; m < report_.modules.size() && !inside; ++m) {
                inside = report_.modules[m].lo <= ip && ip < report_.modules[m].hi;
            }
            outside += inside ? 0 : 1;
        }
    }
    if (outside != 0) {
        warnings_.add("outside", report_.path + ": " + std::to_string(outside) + " of " + std::to_string(total) +
                                     " stack frames lie outside every module (M record); they show as raw addresses");
    }
}

Report Parser::finish() {
    if (line_no_ == 0) throw ReportError(report_.path + ": empty file (not a memguard report)");
    if (end_t_) {
        report_.end_t = *end_t_;
    } else {
        report_.end_t = any_t_ ? max_t_ : 0;
        std::string flushed = heartbeat_t_ && *heartbeat_t_ == report_.end_t ? " (last flush)" : "";
        warnings_.add_first(report_.path + ": no end record: the process did not exit normally (killed?); " +
                            "data up to t=" + seconds_fixed3(report_.end_t) + " s" + flushed);
    }
    warn_frames_outside_modules();
    report_.warnings = warnings_.finish();
    return std::move(report_);
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

Report load_report(const std::string& path) {
    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
    if (!file) throw ReportError(path + ": cannot open: " + std::strerror(errno));
    LineReader reader(file.get(), path);
    Parser parser(path);
    std::string_view text;
    size_t line_no = 0;
    while (true) {
        LineReader::Status st = reader.next(text);
        if (st == LineReader::End) break;
        ++line_no;
        if (st == LineReader::TooLong && line_no == 1) parser.line(text, 1);  // reports the bad magic
        if (st == LineReader::TooLong) {
            throw ReportError(path + ":" + std::to_string(line_no) + ": line longer than " +
                              std::to_string(LineReader::kMaxLine >> 20) + " MiB (corrupt file?)");
        }
        if (st == LineReader::Partial) parser.partial_last_line(text, line_no, reader.bytes_read());
        parser.line(text, line_no);
    }
    return parser.finish();
}

Report parse_report(std::string_view content, const std::string& name) {
    Parser parser(name);
    size_t line_no = 0, pos = 0;
    while (pos < content.size()) {
        ++line_no;
        size_t nl = content.find('\n', pos);
        if (nl == std::string_view::npos) parser.partial_last_line(content.substr(pos), line_no, content.size());
        parser.line(content.substr(pos, nl - pos), line_no);
        pos = nl + 1;
    }
    return parser.finish();
}

}  // namespace memguard::report

// The report reader: docs/report-format.md, version 1.
#include "report/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <unordered_set>

#include "common/text.h"
#include "report/line_reader.h"
#include "report/saturate.h"
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

const char* capture_mode_name(CaptureMode m) {
    switch (m) {
    case CaptureMode::Global: return "global";
    case CaptureMode::ThreadLocal: return "thread_local";
    case CaptureMode::Relaxed: return "relaxed";
    }
    return "unknown";
}

const char* capture_phase_name(CapturePhase p) { return p == CapturePhase::Begin ? "begin" : "end"; }

const char* trigger_name(GcTrigger t) {
    switch (t) {
    case GcTrigger::Automatic: return "automatic";
    case GcTrigger::Explicit: return "explicit";
    case GcTrigger::Memguard: return "memguard";
    }
    return "unknown";
}

const char* phase_source_name(PhaseSource s) {
    switch (s) {
    case PhaseSource::Api: return "api";
    case PhaseSource::Nvtx: return "nvtx";
    case PhaseSource::NvtxRange: return "nvtx_range";
    }
    return "unknown";
}

const Capture* Report::find_capture(uint32_t id) const {
    // Ids rise from 1 in file order, so the capture is usually at index id - 1.
    if (id != 0 && id <= captures.size() && captures[id - 1].id == id) return &captures[id - 1];
    for (const Capture& c : captures) {
        if (c.id == id) return &c;
    }
    return nullptr;
}

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
    /// The input ends inside line `line_no` (no '\n'): a cut header refuses the file; a cut record
    /// is left out with a warning.
    void partial_last_line(std::string_view text, size_t line_no, uint64_t file_size);
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
    // minor 1
    void capture_begin();
    void capture_end();
    void instantiate();
    void launch();
    void exec_destroy();
    void graph_destroy();
    void hazard();
    // minor 2
    void python_frame();
    void python_stack();
    void compile();
    void collection();
    // minor 4
    PhaseSource source_field(size_t i) const;
    void phase_begin();
    void phase_end();
    void mark();
    // minor 3
    void reserve();
    void address_free();
    void create();
    void release();
    void map();
    void unmap();
    void remove_mapping(std::map<uint64_t, size_t>::iterator it, int64_t t);
    // minor 5
    void tensor_alloc();
    void tensor_free();
    void tensor_oom();
    void tensor_oom_site();
    void lost();

    void need_fields(size_t n) const;
    uint64_t hex_field(size_t i, const char* what) const;
    uint64_t dec_field(size_t i, const char* what) const;
    uint32_t id_field(size_t i, const char* what) const;
    int int_field(size_t i, const char* what) const;
    int device_field(size_t i) const;
    int64_t time_field(size_t i);
    /// A time or a duration that is not the record's own time (kMaxTimeNs bounds both).
    int64_t span_field(size_t i, const char* what) const;
    std::optional<uint64_t> stream_field(size_t i) const;
    std::string string_field(size_t i, const char* what) const;
    Kind kind_field(size_t i) const;
    int64_t sdec_field(size_t i, const char* what) const;
    std::optional<int64_t> optional_sdec_field(size_t i, const char* what) const;
    std::optional<uint64_t> optional_hex_field(size_t i, const char* what) const;
    CaptureMode mode_field(size_t i, const char* what) const;
    uint32_t capture_id_field(size_t i);
    void check_stack_ref(uint32_t stack_id, const char* record);
    void check_capture_ref(uint32_t capture_id, const char* record);
    void check_python_stack_ref(uint32_t python_stack_id, const char* record);
    /// The most recent G of `exec` when it is still alive; warns and returns nothing otherwise.
    std::optional<size_t> live_exec(uint64_t exec, const char* record);
    void add_event(Event::Type type, size_t block, int64_t t);
    void warn_frames_outside_modules();

    Report report_;
    Warnings warnings_;
    std::vector<std::string_view> f_;
    size_t line_no_ = 0;
    std::unordered_set<uint32_t> module_ids_;
    std::unordered_map<uint64_t, size_t> live_;   // addr -> block
    std::unordered_map<uint64_t, size_t> freed_;  // addr -> block most recently freed there
    int64_t max_t_ = 0;
    bool any_t_ = false;
    std::optional<int64_t> heartbeat_t_;
    std::optional<int64_t> end_t_;
    int minor_ = 0;                                      // I format_minor so far
    std::unordered_map<uint32_t, size_t> captures_;      // capture id -> index
    std::unordered_map<uint64_t, size_t> execs_;         // exec handle -> its most recent G
    std::unordered_map<uint64_t, size_t> live_graphs_;   // captured graph handle -> capture, until K
    std::unordered_map<uint32_t, size_t> phases_;        // phase id -> index
    std::unordered_map<uint64_t, size_t> reserved_;      // va -> reservation, until v
    std::unordered_map<uint64_t, size_t> handles_;       // handle value -> its most recent N
    std::vector<uint64_t> handle_maps_;                  // per handle: mappings now in place
    std::map<uint64_t, size_t> mapped_;                  // va -> mapping, until q
    std::unordered_map<uint64_t, size_t> live_tensors_;  // addr -> tensor, until t
    std::unordered_map<uint64_t, std::vector<size_t>> gc_frees_;  // tid -> tensors freed in a collection, until Y
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
    if (line_no == 1) {
        header(text);  // a wrong magic or version says more than "truncated"
        fail("truncated at byte " + std::to_string(file_size) + " (the header line is incomplete)");
    }
    // A full disk cuts the file inside a record. What was written whole still stands, as a killed
    // run's file does without its end record. The cut line is not read even when it looks whole:
    // its last field may be cut short.
    warnings_.add_first(report_.path + ":" + std::to_string(line_no) + ": truncated at byte " +
                        std::to_string(file_size) + " (last record incomplete: disk full?); read up to line " +
                        std::to_string(line_no - 1) + ", the last complete record");
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
    // Unknown record types are ignored (format 1.x additions), and so are the records of a later
    // minor in a file that does not declare it (I format_minor).
    struct Kind {
        char type;
        int minor;  // the format minor that added it
        void (Parser::*parse)();
    };
    static constexpr Kind kKinds[] = {
        {'I', 0, &Parser::info},          {'M', 0, &Parser::module},        {'S', 0, &Parser::stack},
        {'A', 0, &Parser::alloc},         {'F', 0, &Parser::free_block},    {'R', 0, &Parser::restore},
        {'E', 0, &Parser::failure},       {'H', 0, &Parser::heartbeat},     {'Z', 0, &Parser::end},
        {'C', 1, &Parser::capture_begin}, {'c', 1, &Parser::capture_end},   {'G', 1, &Parser::instantiate},
        {'L', 1, &Parser::launch},        {'D', 1, &Parser::exec_destroy},  {'K', 1, &Parser::graph_destroy},
        {'W', 1, &Parser::hazard},        {'p', 2, &Parser::python_frame},  {'P', 2, &Parser::python_stack},
        {'X', 2, &Parser::compile},       {'Y', 2, &Parser::collection},    {'V', 3, &Parser::reserve},
        {'v', 3, &Parser::address_free},  {'N', 3, &Parser::create},        {'n', 3, &Parser::release},
        {'Q', 3, &Parser::map},           {'q', 3, &Parser::unmap},         {'B', 4, &Parser::phase_begin},
        {'b', 4, &Parser::phase_end},     {'J', 4, &Parser::mark},          {'T', 5, &Parser::tensor_alloc},
        {'t', 5, &Parser::tensor_free},   {'O', 5, &Parser::tensor_oom},    {'o', 5, &Parser::tensor_oom_site},
        {'U', 6, &Parser::lost},
    };
    if (type.size() != 1) return;
    for (const Kind& k : kKinds) {
        if (k.type == type[0]) {
            if (minor_ >= k.minor) (this->*k.parse)();
            return;
        }
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

int Parser::device_field(size_t i) const {
    int device = int_field(i, "device");
    if (device < -1 || device > kMaxDevice) {
        malformed("device " + quoted(f_[i]) + " out of range (-1 to " + std::to_string(kMaxDevice) + ")");
    }
    return device;
}

int64_t Parser::time_field(size_t i) {
    int64_t v = span_field(i, "time");
    if (!any_t_ || v > max_t_) max_t_ = v;
    any_t_ = true;
    return v;
}

int64_t Parser::span_field(size_t i, const char* what) const {
    auto v = text::parse_sdec(f_[i]);
    if (!v) bad_field(i, what);
    if (*v < -kMaxTimeNs || *v > kMaxTimeNs) {
        malformed(std::string(what) + " " + quoted(f_[i]) + " out of range (2^62 ns or more either way)");
    }
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

int64_t Parser::sdec_field(size_t i, const char* what) const {
    auto v = text::parse_sdec(f_[i]);
    if (!v) bad_field(i, what);
    return *v;
}

std::optional<int64_t> Parser::optional_sdec_field(size_t i, const char* what) const {
    if (f_[i] == "-") return std::nullopt;
    return sdec_field(i, what);
}

std::optional<uint64_t> Parser::optional_hex_field(size_t i, const char* what) const {
    if (f_[i] == "-") return std::nullopt;
    return hex_field(i, what);
}

CaptureMode Parser::mode_field(size_t i, const char* what) const {
    std::string_view m = f_[i];
    if (m == "global") return CaptureMode::Global;
    if (m == "thread_local") return CaptureMode::ThreadLocal;
    if (m == "relaxed") return CaptureMode::Relaxed;
    malformed(std::string("unknown ") + what + " " + quoted(m));
}

uint32_t Parser::capture_id_field(size_t i) {
    uint32_t id = id_field(i, "capture id");
    if (id == 0) malformed("capture id 0 is reserved for \"no capture\"");
    return id;
}

void Parser::info() {
    need_fields(3);
    std::string key = string_field(1, "key");
    std::string value = string_field(2, "value");
    if (key == "format_minor") {
        auto minor = text::parse_dec(value);
        if (!minor || *minor > 1000000) bad_field(2, "format_minor");
        minor_ = static_cast<int>(*minor);
        report_.format_minor = minor_;
    }
    report_.info[key] = std::move(value);
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
    if (!module_ids_.insert(m.id).second) {
        warn("dup-module", "module id " + std::to_string(m.id) + " defined twice; the second M record is ignored");
        return;
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

void Parser::check_capture_ref(uint32_t capture_id, const char* record) {
    if (capture_id != 0 && captures_.count(capture_id) == 0) {
        warn("unknown-capture", std::string(record) + " record names capture " + std::to_string(capture_id) +
                                    ", which no earlier C record began");
    }
}

void Parser::check_python_stack_ref(uint32_t python_stack_id, const char* record) {
    if (python_stack_id != 0 && report_.python_stacks.count(python_stack_id) == 0) {
        warn("unknown-python-stack", std::string(record) + " record uses Python stack " +
                                         std::to_string(python_stack_id) + ", which no earlier P record defines");
    }
}

void Parser::add_event(Event::Type type, size_t block, int64_t t) { report_.events.push_back(Event{type, block, t}); }

void Parser::alloc() {
    need_fields(10 + (minor_ >= 1 ? 1 : 0) + (minor_ >= 2 ? 1 : 0));
    Block b;
    b.t_alloc = time_field(1);
    b.tid = dec_field(2, "tid");
    b.addr = hex_field(3, "address");
    b.size = dec_field(4, "size");
    b.kind = kind_field(5);
    b.api = string_field(6, "api");
    b.device = device_field(7);
    b.stream = stream_field(8);
    b.stack_id = id_field(9, "stack id");
    if (minor_ >= 1) b.capture_id = id_field(10, "capture id");
    if (minor_ >= 2) b.python_stack_id = id_field(11, "Python stack id");
    check_stack_ref(b.stack_id, "A");
    check_capture_ref(b.capture_id, "A");
    check_python_stack_ref(b.python_stack_id, "A");
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
    need_fields(11 + (minor_ >= 2 ? 1 : 0));
    FailedAlloc e;
    e.t = time_field(1);
    e.tid = dec_field(2, "tid");
    e.size = dec_field(3, "size");
    e.kind = kind_field(4);
    e.api = string_field(5, "api");
    e.device = device_field(6);
    e.stream = stream_field(7);
    e.stack_id = id_field(8, "stack id");
    e.error = int_field(9, "error");
    e.live_bytes = dec_field(10, "live bytes");
    if (minor_ >= 2) e.python_stack_id = id_field(11, "Python stack id");
    check_stack_ref(e.stack_id, "E");
    check_python_stack_ref(e.python_stack_id, "E");
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

// --- minor 1 ------------------------------------------------------------------------------------

void Parser::capture_begin() {
    need_fields(7);
    Capture c;
    c.t_begin = time_field(1);
    c.tid = dec_field(2, "tid");
    c.id = capture_id_field(3);
    c.stream = hex_field(4, "stream");
    c.mode = mode_field(5, "capture mode");
    c.target_graph = optional_hex_field(6, "graph");
    if (captures_.count(c.id) != 0) {
        warn("dup-capture", "capture " + std::to_string(c.id) + " begun twice; the second C record is ignored");
        return;
    }
    captures_[c.id] = report_.captures.size();
    report_.captures.push_back(c);
}

void Parser::capture_end() {
    need_fields(6);
    int64_t t = time_field(1);
    uint64_t tid = dec_field(2, "tid");
    uint32_t id = capture_id_field(3);
    int error = int_field(4, "error");
    std::optional<uint64_t> graph = optional_hex_field(5, "graph");
    auto it = captures_.find(id);
    if (it == captures_.end()) {
        check_capture_ref(id, "c");
        return;
    }
    Capture& c = report_.captures[it->second];
    if (c.t_end) {
        warn("capture-ended-twice", "capture " + std::to_string(id) + " ended twice; the second c record is ignored");
        return;
    }
    c.t_end = t;
    c.end_tid = tid;
    c.end_error = error;
    c.graph = graph;
    if (graph) live_graphs_[*graph] = it->second;
}

void Parser::instantiate() {
    need_fields(6);
    GraphExec g;
    g.t_instantiate = time_field(1);
    g.tid = dec_field(2, "tid");
    g.exec = hex_field(3, "exec");
    g.graph = hex_field(4, "graph");
    g.capture_id = id_field(5, "capture id");
    check_capture_ref(g.capture_id, "G");
    auto old = execs_.find(g.exec);
    if (old != execs_.end() && !report_.execs[old->second].t_destroy) {
        warn("double-instantiate", "graph exec " + hex(g.exec) + " instantiated while already alive; the earlier "
                                   "exec is taken as destroyed (a destroy was not recorded)");
        report_.execs[old->second].t_destroy = g.t_instantiate;
    }
    execs_[g.exec] = report_.execs.size();
    report_.execs.push_back(g);
}

std::optional<size_t> Parser::live_exec(uint64_t exec, const char* record) {
    auto it = execs_.find(exec);
    if (it == execs_.end()) {
        warn("unknown-exec", std::string(record) + " record names graph exec " + hex(exec) +
                                 ", which no earlier G record instantiated; ignored");
        return std::nullopt;
    }
    if (report_.execs[it->second].t_destroy) {
        warn("destroyed-exec", std::string(record) + " record names graph exec " + hex(exec) +
                                   ", which was destroyed (D) and not instantiated again; ignored");
        return std::nullopt;
    }
    return it->second;
}

void Parser::launch() {
    need_fields(5);
    time_field(1);
    dec_field(2, "tid");
    uint64_t exec = hex_field(3, "exec");
    hex_field(4, "stream");
    if (auto i = live_exec(exec, "L")) ++report_.execs[*i].launches;
}

void Parser::exec_destroy() {
    need_fields(4);
    int64_t t = time_field(1);
    dec_field(2, "tid");
    uint64_t exec = hex_field(3, "exec");
    if (auto i = live_exec(exec, "D")) report_.execs[*i].t_destroy = t;
}

void Parser::graph_destroy() {
    need_fields(4);
    GraphDestroy k;
    k.t = time_field(1);
    k.tid = dec_field(2, "tid");
    k.graph = hex_field(3, "graph");
    // Graphs memguard did not see a capture end in (built node by node) are destroyed too: no warning.
    auto it = live_graphs_.find(k.graph);
    if (it != live_graphs_.end()) {
        Capture& c = report_.captures[it->second];
        c.t_graph_destroy = k.t;
        k.capture_id = c.id;
        live_graphs_.erase(it);
    }
    report_.graph_destroys.push_back(k);
}

void Parser::hazard() {
    need_fields(4);
    int64_t t = time_field(1);
    uint64_t tid = dec_field(2, "tid");
    std::string_view kind = f_[3];
    if (kind == "unsafe_call") {
        need_fields(8);
        UnsafeCall u;
        u.t = t;
        u.tid = tid;
        u.api = string_field(4, "api");
        u.capture_id = capture_id_field(5);
        u.capture_mode = mode_field(6, "capture mode");
        u.thread_mode = mode_field(7, "thread mode");
        check_capture_ref(u.capture_id, "W unsafe_call");
        report_.hazards.unsafe_calls.push_back(std::move(u));
    } else if (kind == "free_live_graph") {
        need_fields(8);
        FreeWhileGraphAlive h;
        h.t = t;
        h.tid = tid;
        h.addr = hex_field(4, "address");
        h.size = dec_field(5, "size");
        h.capture_id = capture_id_field(6);
        h.exec = hex_field(7, "exec");
        check_capture_ref(h.capture_id, "W free_live_graph");
        // The library writes the hazard right after the F of the block; a hazard before the F (the
        // block still live) is understood too. A candidate of the named capture wins.
        std::optional<size_t> candidates[2];
        if (auto it = freed_.find(h.addr); it != freed_.end()) candidates[0] = it->second;
        if (auto it = live_.find(h.addr); it != live_.end()) candidates[1] = it->second;
        for (const auto& c : candidates) {
            if (c && !h.block && report_.blocks[*c].capture_id == h.capture_id) h.block = c;
        }
        for (const auto& c : candidates) {
            if (c && !h.block) h.block = c;
        }
        if (!h.block) {
            warn("hazard-free-unknown", "free_live_graph hazard at " + hex(h.addr) +
                                            ", which is neither live nor freed; its allocation site is unknown");
        }
        auto exec = execs_.find(h.exec);
        if (exec != execs_.end()) {
            h.exec_index = exec->second;
        } else {
            warn("unknown-exec", "W free_live_graph record names graph exec " + hex(h.exec) +
                                     ", which no earlier G record instantiated");
        }
        report_.hazards.frees_while_graph_alive.push_back(h);
    } else if (kind == "warmup_retention") {
        need_fields(10);
        WarmupRetention w;
        w.t = t;
        w.tid = tid;
        w.capture_id = capture_id_field(4);
        if (f_[5] == "begin") {
            w.phase = CapturePhase::Begin;
        } else if (f_[5] == "end") {
            w.phase = CapturePhase::End;
        } else {
            malformed("unknown phase " + quoted(f_[5]));
        }
        w.since = span_field(6, "since");
        w.stack_id = id_field(7, "stack id");
        w.blocks = dec_field(8, "blocks");
        w.bytes = dec_field(9, "bytes");
        check_capture_ref(w.capture_id, "W warmup_retention");
        check_stack_ref(w.stack_id, "W warmup_retention");
        report_.hazards.warmup_retention.push_back(w);
    }
    // Other kinds are later additions: ignored, like unknown record types.
}

// --- minor 2 ------------------------------------------------------------------------------------

void Parser::python_frame() {
    need_fields(5);
    PythonFrame p;
    p.id = id_field(1, "frame id");
    if (p.id == 0) malformed("Python frame id 0 is not allowed (ids start at 1)");
    p.line = int_field(2, "line");
    p.function = string_field(3, "function");
    p.filename = string_field(4, "filename");
    if (report_.python_frames.count(p.id) != 0) {
        warn("dup-python-frame",
             "Python frame " + std::to_string(p.id) + " defined twice; the second p record is ignored");
        return;
    }
    report_.python_frames.emplace(p.id, std::move(p));
}

void Parser::python_stack() {
    need_fields(2);
    PythonStack s;
    s.id = id_field(1, "Python stack id");
    if (s.id == 0) malformed("Python stack id 0 is reserved for \"no stack\"");
    s.frames.reserve(f_.size() - 2);
    for (size_t i = 2; i < f_.size(); ++i) {
        uint32_t frame = id_field(i, "frame id");
        if (report_.python_frames.count(frame) == 0) {
            warn("unknown-python-frame", "P record uses Python frame " + std::to_string(frame) +
                                             ", which no earlier p record defines");
        }
        s.frames.push_back(frame);
    }
    if (report_.python_stacks.count(s.id) != 0) {
        warn("dup-python-stack",
             "Python stack " + std::to_string(s.id) + " defined twice; the second P record is ignored");
        return;
    }
    report_.python_stacks.emplace(s.id, std::move(s));
}

void Parser::compile() {
    need_fields(4);
    Compile x;
    x.t = time_field(1);
    x.tid = dec_field(2, "tid");
    x.id = string_field(3, "compile id");
    report_.compiles.push_back(std::move(x));
}

void Parser::collection() {
    need_fields(11);
    Collection y;
    y.t = time_field(1);
    y.tid = dec_field(2, "tid");
    std::string_view trigger = f_[3];
    if (trigger == "automatic") {
        y.trigger = GcTrigger::Automatic;
    } else if (trigger == "explicit") {
        y.trigger = GcTrigger::Explicit;
    } else if (trigger == "memguard") {
        y.trigger = GcTrigger::Memguard;
    } else {
        malformed("unknown trigger " + quoted(trigger));
    }
    y.generation = int_field(4, "generation");
    y.duration_ns = span_field(5, "duration");
    y.collected = sdec_field(6, "collected");
    y.uncollectable = sdec_field(7, "uncollectable");
    y.cuda_bytes_freed = optional_sdec_field(8, "CUDA bytes freed");
    if (f_[9] != "-") {
        std::string ids = string_field(9, "compile ids");
        size_t start = 0;
        while (true) {
            size_t comma = ids.find(',', start);
            y.compile_ids.push_back(ids.substr(start, comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    if (f_[10] != "-") y.mark_age_ns = span_field(10, "mark age");
    // The blocks this thread freed while the collection ran (t records with gc 1) belong to it.
    auto pending = gc_frees_.find(y.tid);
    if (pending != gc_frees_.end()) {
        for (size_t i : pending->second) report_.tensors[i].collection = report_.collections.size();
        gc_frees_.erase(pending);
    }
    report_.collections.push_back(std::move(y));
}

// --- minor 3 ------------------------------------------------------------------------------------

void Parser::reserve() {
    need_fields(7);
    Reservation v;
    v.t_reserve = time_field(1);
    v.tid = dec_field(2, "tid");
    v.va = hex_field(3, "address");
    v.size = dec_field(4, "size");
    v.stack_id = id_field(5, "stack id");
    v.python_stack_id = id_field(6, "Python stack id");
    check_stack_ref(v.stack_id, "V");
    check_python_stack_ref(v.python_stack_id, "V");
    size_t index = report_.reservations.size();
    auto old = reserved_.find(v.va);
    if (old != reserved_.end()) {
        warn("double-reserve", "address range reserved at " + hex(v.va) + ", which is already reserved; the "
                               "earlier range is taken as freed (a cuMemAddressFree was not recorded)");
        report_.reservations[old->second].t_free = v.t_reserve;
        add_event(Event::AddressFree, old->second, v.t_reserve);
    }
    reserved_[v.va] = index;
    report_.reservations.push_back(v);
    add_event(Event::Reserve, index, v.t_reserve);
}

void Parser::address_free() {
    need_fields(5);
    int64_t t = time_field(1);
    dec_field(2, "tid");
    uint64_t va = hex_field(3, "address");
    dec_field(4, "size");
    auto it = reserved_.find(va);
    if (it == reserved_.end()) {
        warn("address-free-not-reserved", "address free of " + hex(va) + ", which is not reserved; ignored");
        return;
    }
    report_.reservations[it->second].t_free = t;
    add_event(Event::AddressFree, it->second, t);
    reserved_.erase(it);
}

void Parser::create() {
    need_fields(9);
    PhysicalHandle h;
    h.t_create = time_field(1);
    h.tid = dec_field(2, "tid");
    h.handle = hex_field(3, "handle");
    h.size = dec_field(4, "size");
    h.device = device_field(5);
    h.stack_id = id_field(6, "stack id");
    h.python_stack_id = id_field(7, "Python stack id");
    h.capture_id = id_field(8, "capture id");
    check_stack_ref(h.stack_id, "N");
    check_python_stack_ref(h.python_stack_id, "N");
    check_capture_ref(h.capture_id, "N");
    auto old = handles_.find(h.handle);
    if (old != handles_.end() && !report_.handles[old->second].t_release) {
        warn("double-create", "physical memory created with handle " + hex(h.handle) + ", which is not released; "
                              "the earlier handle is taken as released (a cuMemRelease was not recorded)");
        PhysicalHandle& prev = report_.handles[old->second];
        prev.t_release = h.t_create;
        if (handle_maps_[old->second] == 0) prev.t_gone = h.t_create;
        add_event(Event::Release, old->second, h.t_create);
    }
    size_t index = report_.handles.size();
    handles_[h.handle] = index;
    handle_maps_.push_back(0);
    report_.handles.push_back(h);
    add_event(Event::Create, index, h.t_create);
}

void Parser::release() {
    need_fields(4);
    int64_t t = time_field(1);
    dec_field(2, "tid");
    uint64_t handle = hex_field(3, "handle");
    auto it = handles_.find(handle);
    if (it == handles_.end() || report_.handles[it->second].t_release) {
        warn("release-not-created", "release of handle " + hex(handle) + ", which no unreleased N record created; "
                                    "ignored");
        return;
    }
    PhysicalHandle& h = report_.handles[it->second];
    h.t_release = t;
    // The driver returns the memory at the release only when nothing maps it; else at the last unmap.
    if (handle_maps_[it->second] == 0) h.t_gone = t;
    add_event(Event::Release, it->second, t);
}

void Parser::remove_mapping(std::map<uint64_t, size_t>::iterator it, int64_t t) {
    size_t index = it->second;
    mapped_.erase(it);
    Mapping& m = report_.mappings[index];
    m.t_unmap = t;
    if (m.handle) {
        uint64_t& maps = handle_maps_[*m.handle];
        maps -= maps > 0 ? 1 : 0;
        PhysicalHandle& h = report_.handles[*m.handle];
        if (maps == 0 && h.t_release && !h.t_gone) h.t_gone = t;
    }
    add_event(Event::Unmap, index, t);
}

void Parser::map() {
    need_fields(7);
    Mapping m;
    m.t_map = time_field(1);
    m.tid = dec_field(2, "tid");
    m.va = hex_field(3, "address");
    m.size = dec_field(4, "size");
    m.offset = dec_field(5, "offset");
    m.handle_value = hex_field(6, "handle");
    auto h = handles_.find(m.handle_value);
    if (h != handles_.end() && !report_.handles[h->second].t_gone) {
        m.handle = h->second;
        if (report_.handles[h->second].t_release) {
            warn("map-released", "mapping of handle " + hex(m.handle_value) + ", which was released");
        }
    } else {
        warn("map-unknown-handle", "mapping at " + hex(m.va) + " of handle " + hex(m.handle_value) +
                                       ", which no N record created; counted as mapped, not as physical memory");
    }
    auto old = mapped_.find(m.va);
    if (old != mapped_.end()) {
        warn("double-map", "mapping at " + hex(m.va) + ", which is already mapped; the earlier mapping is taken as "
                           "unmapped (a cuMemUnmap was not recorded)");
        remove_mapping(old, m.t_map);
    }
    size_t index = report_.mappings.size();
    if (m.handle) {
        ++handle_maps_[*m.handle];
        ++report_.handles[*m.handle].maps;
    }
    mapped_[m.va] = index;
    report_.mappings.push_back(m);
    add_event(Event::Map, index, m.t_map);
}

void Parser::unmap() {
    need_fields(5);
    int64_t t = time_field(1);
    dec_field(2, "tid");
    uint64_t va = hex_field(3, "address");
    uint64_t size = dec_field(4, "size");
    // cuMemUnmap takes whole mappings: every mapping that starts in the range goes.
    uint64_t end = va + size < va ? UINT64_MAX : va + size;
    auto it = mapped_.lower_bound(va);
    if (it == mapped_.end() || it->first >= end) {
        warn("unmap-not-mapped", "unmap of " + hex(va) + ", which is not mapped; ignored");
        return;
    }
    while (it != mapped_.end() && it->first < end) remove_mapping(it++, t);
    ++report_.unmaps;
}

// --- minor 4 ------------------------------------------------------------------------------------

PhaseSource Parser::source_field(size_t i) const {
    std::string_view s = f_[i];
    if (s == "api") return PhaseSource::Api;
    if (s == "nvtx") return PhaseSource::Nvtx;
    if (s == "nvtx_range") return PhaseSource::NvtxRange;
    malformed("unknown source " + quoted(s));
}

void Parser::phase_begin() {
    need_fields(6);
    Phase p;
    p.t_begin = time_field(1);
    p.tid = dec_field(2, "tid");
    p.id = id_field(3, "phase id");
    if (p.id == 0) malformed("phase id 0 is not allowed (ids start at 1)");
    p.source = source_field(4);
    p.name = string_field(5, "name");
    p.events_at_begin = report_.events.size();
    p.begin_line = line_no_;
    if (phases_.count(p.id) != 0) {
        warn("dup-phase", "phase " + std::to_string(p.id) + " begun twice; the second B record is ignored");
        return;
    }
    phases_[p.id] = report_.phases.size();
    report_.phases.push_back(std::move(p));
}

void Parser::phase_end() {
    need_fields(4);
    int64_t t = time_field(1);
    uint64_t tid = dec_field(2, "tid");
    uint32_t id = id_field(3, "phase id");
    auto it = phases_.find(id);
    if (it == phases_.end()) {
        warn("unknown-phase", "b record ends phase " + std::to_string(id) + ", which no earlier B record began; ignored");
        return;
    }
    Phase& p = report_.phases[it->second];
    if (p.t_end) {
        warn("phase-ended-twice", "phase " + std::to_string(id) + " ended twice; the second b record is ignored");
        return;
    }
    p.t_end = t;
    p.end_tid = tid;
    p.events_at_end = report_.events.size();
    p.end_line = line_no_;
}

void Parser::mark() {
    need_fields(5);
    Mark m;
    m.t = time_field(1);
    m.tid = dec_field(2, "tid");
    m.source = source_field(3);
    m.name = string_field(4, "name");
    m.events_before = report_.events.size();
    report_.marks.push_back(std::move(m));
}

void Parser::warn_frames_outside_modules() {
    // The modules' ranges merged and sorted, so that each frame costs a binary search, not a pass
    // over every module.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const Module& m : report_.modules) {
        if (m.lo < m.hi) ranges.emplace_back(m.lo, m.hi);
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second) {
            merged.back().second = std::max(merged.back().second, r.second);
        } else {
            merged.push_back(r);
        }
    }
    size_t outside = 0, total = 0;
    for (const auto& [id, s] : report_.stacks) {
        for (uint64_t ip : s.ips) {
            ++total;
            auto after = std::upper_bound(merged.begin(), merged.end(), std::make_pair(ip, UINT64_MAX));
            bool inside = after != merged.begin() && ip < std::prev(after)->second;
            outside += inside ? 0 : 1;
        }
    }
    if (outside != 0) {
        warnings_.add("outside", report_.path + ": " + std::to_string(outside) + " of " + std::to_string(total) +
                                     " stack frames lie outside every module (M record); they show as raw addresses");
    }
}

// --- minor 5 ------------------------------------------------------------------------------------

void Parser::tensor_alloc() {
    need_fields(12);
    Tensor x;
    x.t_alloc = time_field(1);
    x.tid = dec_field(2, "tid");
    x.addr = hex_field(3, "address");
    x.size = dec_field(4, "size");
    x.requested = dec_field(5, "requested size");
    x.device = device_field(6);
    x.stream = hex_field(7, "stream");
    x.stack_id = id_field(8, "stack id");
    x.python_stack_id = id_field(9, "Python stack id");
    x.capture_id = id_field(10, "capture id");
    x.pool = string_field(11, "pool");
    // The block size is the request rounded up; a file saying otherwise still has usable sizes.
    if (x.requested > x.size) {
        warn("requested-over-size", "tensor block at " + hex(x.addr) + ": requested size " +
                                        std::to_string(x.requested) + " exceeds block size " + std::to_string(x.size));
    }
    check_stack_ref(x.stack_id, "T");
    check_capture_ref(x.capture_id, "T");
    check_python_stack_ref(x.python_stack_id, "T");
    size_t index = report_.tensors.size();
    auto old = live_tensors_.find(x.addr);
    if (old != live_tensors_.end()) {
        warn("tensor-double-alloc", "tensor block at " + hex(x.addr) + ", which is already live; the earlier block is "
                             "taken as freed (a t record is missing)");
        report_.tensors[old->second].t_free = x.t_alloc;
        add_event(Event::TensorFree, old->second, x.t_alloc);
    }
    live_tensors_[x.addr] = index;
    report_.tensors.push_back(std::move(x));
    add_event(Event::TensorAlloc, index, report_.tensors.back().t_alloc);
}

void Parser::tensor_free() {
    need_fields(5);
    int64_t t = time_field(1);
    uint64_t tid = dec_field(2, "tid");
    uint64_t addr = hex_field(3, "address");
    if (f_[4] != "0" && f_[4] != "1") bad_field(4, "gc flag", " (0 or 1 expected)");
    bool gc = f_[4] == "1";
    auto it = live_tensors_.find(addr);
    if (it == live_tensors_.end()) {
        warn("tensor-free-not-live", "tensor free of " + hex(addr) + ", which is not live; ignored");
        return;
    }
    size_t index = it->second;
    live_tensors_.erase(it);
    Tensor& x = report_.tensors[index];
    x.t_free = t;
    x.free_tid = tid;
    x.freed_in_gc = gc;
    if (gc) gc_frees_[tid].push_back(index);
    add_event(Event::TensorFree, index, t);
}

void Parser::tensor_oom() {
    need_fields(12);
    TensorOom o;
    o.t = time_field(1);
    o.tid = dec_field(2, "tid");
    o.device = device_field(3);
    o.requested = dec_field(4, "requested size");
    o.rounded = dec_field(5, "rounded size");
    o.allocated = dec_field(6, "allocated bytes");
    o.reserved = dec_field(7, "reserved bytes");
    o.limit = dec_field(8, "limit");
    o.stack_id = id_field(9, "stack id");
    o.python_stack_id = id_field(10, "Python stack id");
    std::string_view rescued = f_[11];
    if (rescued != "none" && rescued != "cache" && rescued != "gc") malformed("unknown rescue " + quoted(rescued));
    o.rescued = std::string(rescued);
    check_stack_ref(o.stack_id, "O");
    check_python_stack_ref(o.python_stack_id, "O");
    report_.tensor_ooms.push_back(std::move(o));
}

void Parser::tensor_oom_site() {
    need_fields(6);
    int64_t t = time_field(1);
    OomSite s;
    s.stack_id = id_field(2, "stack id");
    s.python_stack_id = id_field(3, "Python stack id");
    s.blocks = dec_field(4, "blocks");
    s.bytes = dec_field(5, "bytes");
    if (report_.tensor_ooms.empty() || report_.tensor_ooms.back().t != t) {
        malformed("no O record at t=" + std::string(f_[1]) + " precedes it");
    }
    check_stack_ref(s.stack_id, "o");
    check_python_stack_ref(s.python_stack_id, "o");
    report_.tensor_ooms.back().sites.push_back(s);
}

void Parser::lost() {
    need_fields(4);
    const int64_t t = time_field(1);
    const int64_t since = span_field(2, "time of the first lost record");
    const uint64_t n = dec_field(3, "record count");
    if (since > t) malformed("the first lost record's time " + std::string(f_[2]) + " is after the record's");
    if (report_.lost_records == 0) report_.lost_first_t = since;
    add_to(report_.lost_records, n);
    report_.lost_last_t = t;
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
    for (Phase& p : report_.phases) {
        if (!p.t_end) p.events_at_end = report_.events.size();
    }
    if (report_.lost_records > 0) {
        warnings_.add_first(report_.path + ": incomplete: the recorded process lost " +
                            std::to_string(report_.lost_records) + " record(s) between t=" +
                            seconds_fixed3(report_.lost_first_t) + " s and t=" + seconds_fixed3(report_.lost_last_t) +
                            " s (it ran out of host memory); allocations and frees from then may be missing");
    }
    warn_frames_outside_modules();
    report_.warnings = warnings_.finish();
    return std::move(report_);
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

/// Opens a report for reading. Not blocking in open(2): a FIFO that no one writes (say one planted
/// where `merge --template` looks) reads as an empty file instead of hanging; a pipe with a writer
/// (`memguard summary <(zcat r.mgr.gz)`) reads as usual.
std::FILE* open_report(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    int flags = fcntl(fd, F_GETFL);
    std::FILE* f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? nullptr : fdopen(fd, "rb");
    if (f == nullptr) {
        int err = errno;
        ::close(fd);
        errno = err;
    }
    return f;
}

}  // namespace

Report load_report(const std::string& path) {
    std::unique_ptr<std::FILE, FileCloser> file(open_report(path));
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
        if (st == LineReader::Partial) {
            parser.partial_last_line(text, line_no, reader.bytes_read());
            break;
        }
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
        if (nl == std::string_view::npos) {
            parser.partial_last_line(content.substr(pos), line_no, content.size());
            break;
        }
        parser.line(content.substr(pos, nl - pos), line_no);
        pos = nl + 1;
    }
    return parser.finish();
}

}  // namespace memguard::report

// The report reader: docs/report-format.md, version 1. The parser core: lines, the header, the
// dispatch of each record by its letter and the file's minor through the record table
// (format/records.h), the shared checks, and the meta records (I, M, S, H, Z, p, P, U); each
// family's records are applied in read_<family>.cpp.
#include "report/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>

#include "common/text.h"
#include "format/binary_decode.h"
#include "format/decode.h"
#include "format/fields.h"
#include "report/line_reader.h"
#include "report/parser.h"
#include "report/saturate.h"
#include "report/stream.h"
#include "report/units.h"
#include "report/user_frame.h"
#include "report/warnings.h"

namespace memguard::report {

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

}  // namespace

void split_fields(std::string_view line, std::vector<std::string_view>& out) {
    // Eight characters at a time (the spaces of a word found by bit arithmetic): fields are short,
    // where a search call per field, or a test per character, costs more than the field (perf: a
    // fifth of the reading time went here).
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the lowest byte of a word is its first character");
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull, kSpaces = kOnes * ' ';
    out.clear();
    const char* const base = line.data();
    const size_t n = line.size();
    size_t start = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, base + i, 8);
        const uint64_t x = w ^ kSpaces;  // a zero byte where a space was
        uint64_t zeros = (x - kOnes) & ~x & kHighs;
        while (zeros != 0) {
            // The lowest flagged byte is exact; flags above a true zero may be false (a '!' right
            // after a space): each is checked.
            const size_t at = i + static_cast<size_t>(__builtin_ctzll(zeros) >> 3);
            zeros &= zeros - 1;
            if (base[at] != ' ') continue;
            out.emplace_back(base + start, at - start);
            start = at + 1;
        }
    }
    for (; i < n; ++i) {
        if (base[i] == ' ') {
            out.emplace_back(base + start, i - start);
            start = i + 1;
        }
    }
    out.emplace_back(base + start, n - start);
}

namespace {}  // namespace

std::string hex(uint64_t v) {
    char buf[16];
    return std::string(buf, format::put_hex(buf, v));
}

std::string Parser::where() const {
    const size_t line_no = detail_ && detail_->reading ? detail_->parts->line_no() : line_no_;
    return binary_ && offset_ > 0 ? ": record at byte " + std::to_string(offset_) : ":" + std::to_string(line_no);
}

std::string Parser::field_text(size_t i, const std::string& value) const {
    return binary_ ? value : std::string(f_[i]);
}

void Parser::fail(const std::string& what) const { throw ReportError(source() + where() + ": " + what); }

void Parser::malformed(const std::string& detail) const {
    fail("malformed " + std::string(f_[0]) + " record: " + detail);
}

void Parser::warn(const char* cls, const std::string& what) { warnings_.add(cls, source() + where() + ": " + what); }

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
    magic_line_.assign(text.data(), text.size());
    split_fields(text, f_);
    std::string expected = std::string(kMagic) + " " + std::to_string(kFormatVersion);
    // A binary report's header line (docs/report-format.md, "Binary encoding"): the same version.
    binary_ = f_[0] == format::kBinaryMagic && f_.size() >= 2;
    if ((f_[0] != kMagic && !binary_) || f_.size() < 2) {
        fail("not a memguard report: first line is " + format::quoted(text) + ", expected '" + expected + "'");
    }
    auto version = text::parse_dec(f_[1]);
    if (!version || *version > 1000000) fail("bad format version " + format::quoted(f_[1]) + " in the header");
    if (binary_) {
        // The binary header's number is its encoding's version: 1 and 2 both carry format major 1.
        if (*version < static_cast<uint64_t>(format::binary::kVersion1) ||
            *version > static_cast<uint64_t>(format::binary::kVersion)) {
            fail("binary report encoding version " + std::to_string(*version) + " is not one this memguard reads (" +
                 std::to_string(format::binary::kVersion1) + " to " + std::to_string(format::binary::kVersion) + ")");
        }
        binary_decoder_->set_version(static_cast<int>(*version));
        report_.version = kFormatVersion;
        return;
    }
    std::string reads = " this memguard reads (" + std::to_string(kFormatVersion) + ")";
    if (*version > static_cast<uint64_t>(kFormatVersion)) {
        fail("report format version " + std::to_string(*version) + " is newer than" + reads);
    }
    if (*version < static_cast<uint64_t>(kFormatVersion)) {
        fail("report format version " + std::to_string(*version) + " is not the one" + reads);
    }
    report_.version = static_cast<int>(*version);
}

void Parser::note_time(std::optional<int64_t> t) {
    if (t) {
        if (!any_t_ || *t > max_t_) max_t_ = *t;
        any_t_ = true;
    }
}

template <class R>
void Parser::read() {
    R r{};
    text_decoder_->read(f_, minor_, r);
    if constexpr (format::is_predicted<R>()) {
        if (skip_carried_ > 0) {  // a bounded report's part repeats the blocks live at its start
            --skip_carried_;
            known_carried(r);
            return;
        }
    }
    note_time();
    apply(r);
}

template <char Letter>
void Parser::read_keyed() {
    std::string_view key;
    bool head = false, matched = false;
    format::for_each_record([&](auto type) {
        using R = typename decltype(type)::type;
        if constexpr (R::kLetter == Letter && format::is_keyed<R>()) {
            if (!head) {
                R r{};
                key = text_decoder_->read_head(f_, minor_, r);
                note_time();
                head = true;
            }
            if (!matched && key == R::kKey) {
                matched = true;
                read<R>();
            }
        }
    });
    // Other keys are later additions: ignored, like unknown record types.
}

void Parser::record() {
    // Unknown record types are ignored (format 1.x additions), and so are the records of a later
    // minor in a file that does not declare it (I format_minor). Which letter is which record, and
    // from which minor, is the record table's (format/records.h).
    struct Entry {
        int minor = 0;
        void (Parser::*read)() = nullptr;
    };
    static const std::array<Entry, 128> kEntries = [] {
        std::array<Entry, 128> entries{};
        format::for_each_record([&entries](auto type) {
            using R = typename decltype(type)::type;
            Entry& e = entries[static_cast<unsigned char>(R::kLetter)];
            if constexpr (format::is_keyed<R>()) {
                e = Entry{R::kMinor, &Parser::read_keyed<R::kLetter>};
            } else {
                e = Entry{R::kMinor, &Parser::read<R>};
            }
        });
        return entries;
    }();
    std::string_view type = f_[0];
    if (type.size() != 1 || static_cast<unsigned char>(type[0]) >= kEntries.size()) return;
    const Entry& e = kEntries[static_cast<unsigned char>(type[0])];
    if (e.read == nullptr || minor_ < e.minor) return;
    try {
        (this->*e.read)();
    } catch (const format::Malformed& m) {
        malformed(m.what());
    }
}

void Parser::apply(const rec::Info& r) {
    std::string key(r.key);
    std::string value(r.value);
    if (key == "format_minor") {
        auto minor = text::parse_dec(value);
        if (!minor || *minor > 1000000) malformed("bad format_minor " + format::quoted(field_text(2, value)));
        minor_ = static_cast<int>(*minor);
        report_.format_minor = minor_;
    }
    if (key == "gc_budget") {
        char* end = nullptr;
        const double f = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(f > 0 && f <= 1)) {
            malformed("bad gc_budget " + format::quoted(field_text(2, value)) + " (a fraction above 0 and at most 1)");
        }
        report_.gc_budget = f;
    }
    if (key == "report_limit" && !detail_) start_detail();  // minor 10: a bounded report's spine
    report_.info[key] = std::move(value);
}

void Parser::apply(const rec::Module& r) {
    Module m;
    m.id = r.module_id;
    m.lo = r.lo;
    m.hi = r.hi;
    m.bias = r.bias;
    m.build_id = std::string(r.build_id);
    m.path = std::string(r.path);
    if (m.hi < m.lo)
        malformed("hi " + format::quoted(field_text(3, hex(m.hi))) + " is below lo " +
                  format::quoted(field_text(2, hex(m.lo))));
    if (!module_ids_.insert(m.id).second) {
        warn("dup-module", "module id " + std::to_string(m.id) + " defined twice; the second M record is ignored");
        return;
    }
    report_.modules.push_back(std::move(m));
}

void Parser::apply(const rec::Stack& r) {
    Stack s;
    s.id = r.stack_id;
    s.ips.assign(r.ips.data, r.ips.data + r.ips.size);
    s.modules_known = report_.modules.size();
    if (report_.stacks.count(s.id) != 0) {
        warn("dup-stack", "stack id " + std::to_string(s.id) + " defined twice; the second S record is ignored");
        return;
    }
    stack_ids_.add(s.id);
    report_.stacks.emplace(s.id, std::move(s));
}

void Parser::apply(const rec::Heartbeat& r) { heartbeat_t_ = r.t; }

void Parser::apply(const rec::End& r) {
    if (!end_t_) end_t_ = r.t;
    report_.complete = true;
}

void Parser::apply(const rec::PyFrame& r) {
    PythonFrame p;
    p.id = r.frame_id;
    p.line = r.line;
    p.function = std::string(r.function);
    p.filename = std::string(r.filename);
    if (report_.python_frames.count(p.id) != 0) {
        warn("dup-python-frame",
             "Python frame " + std::to_string(p.id) + " defined twice; the second p record is ignored");
        return;
    }
    report_.python_frames.emplace(p.id, std::move(p));
}

void Parser::apply(const rec::PyStack& r) {
    PythonStack s;
    s.id = r.python_stack_id;
    s.frames.assign(r.frames.data, r.frames.data + r.frames.size);
    for (uint32_t frame : s.frames) {
        if (report_.python_frames.count(frame) == 0) {
            warn("unknown-python-frame",
                 "P record uses Python frame " + std::to_string(frame) + ", which no earlier p record defines");
        }
    }
    if (report_.python_stacks.count(s.id) != 0) {
        warn("dup-python-stack",
             "Python stack " + std::to_string(s.id) + " defined twice; the second P record is ignored");
        return;
    }
    python_stack_ids_.add(s.id);
    report_.python_stacks.emplace(s.id, std::move(s));
}

void Parser::apply(const rec::Lost& r) {
    if (r.first_t > r.t)
        malformed("the first lost record's time " + field_text(2, std::to_string(r.first_t)) +
                  " is after the record's");
    if (report_.lost_records == 0) report_.lost_first_t = r.first_t;
    add_to(report_.lost_records, r.count);
    report_.lost_last_t = r.t;
}

void Parser::apply(const rec::PythonPath& r) {
    if (r.path.empty()) malformed("empty path");
    for (const PythonPath& p : report_.python_paths) {
        if (p.kind == r.kind && p.path == r.path) return;  // a path written again (a fork's child) adds nothing
    }
    report_.python_paths.push_back(PythonPath{r.kind, std::string(r.path)});
}

void Parser::check_stack_ref(uint32_t stack_id, const char* record) {
    if (stack_id != 0 && !stack_ids_.contains(stack_id)) {
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
    if (python_stack_id != 0 && !python_stack_ids_.contains(python_stack_id)) {
        warn("unknown-python-stack", std::string(record) + " record uses Python stack " +
                                         std::to_string(python_stack_id) + ", which no earlier P record defines");
    }
}

void Parser::add_event(Event::Type type, size_t block, int64_t t) {
    ++events_;
    if (!detail_ || !detail_->reading) ++spine_events_;
    if (observer_ == nullptr) {
        report_.events.push_back(Event{type, block, t});
    } else if (!stopped_ && !observer_->on_event(report_, Event{type, block, t})) {
        stopped_ = true;
    }
}

size_t Parser::take_block_slot() {
    if (free_block_slots_.empty()) {
        report_.blocks.emplace_back();
        return report_.blocks.size() - 1;
    }
    size_t slot = free_block_slots_.back();
    free_block_slots_.pop_back();
    return slot;
}

size_t Parser::take_tensor_slot() {
    if (free_tensor_slots_.empty()) {
        report_.tensors.emplace_back();
        return report_.tensors.size() - 1;
    }
    size_t slot = free_tensor_slots_.back();
    free_tensor_slots_.pop_back();
    return slot;
}

namespace {

/// The items of `slots` that `live` names (`slot_of`: the slot of a map value, if live), in order of
/// their records.
template <class T, class V, class SlotOf>
std::vector<T> live_items(std::vector<T>& slots, const AddrMap<V>& live, SlotOf slot_of) {
    std::vector<T> out;
    live.for_each([&](uint64_t, const V& v) {
        if (std::optional<size_t> slot = slot_of(v)) out.push_back(std::move(slots[*slot]));
    });
    std::sort(out.begin(), out.end(), [](const T& a, const T& b) { return a.order < b.order; });
    return out;
}

}  // namespace

void Parser::compact_slots() {
    report_.blocks = live_items(report_.blocks, blocks_at_, [](const AtAddr& at) {
        return at.live ? std::optional<size_t>(at.block) : std::nullopt;
    });
    report_.tensors = live_items(report_.tensors, live_tensors_,
                                 [](size_t slot) { return std::optional<size_t>(slot); });
    blocks_at_.clear();
    live_tensors_.clear();
    free_block_slots_.clear();
    free_tensor_slots_.clear();
    recent_frees_.clear();
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

Report Parser::finish() {
    if (line_no_ == 0) throw ReportError(report_.path + ": empty file (not a memguard report)");
    if (detail_) finish_detail();  // a killed run's last detail may follow the spine's last `l`
    if (end_t_) {
        report_.end_t = *end_t_;
    } else {
        report_.end_t = any_t_ ? max_t_ : 0;
        std::string flushed = heartbeat_t_ && *heartbeat_t_ == report_.end_t ? " (last flush)" : "";
        warnings_.add_first(report_.path + ": no end record: the process did not exit normally (killed?); " +
                            "data up to t=" + seconds_fixed3(report_.end_t) + " s" + flushed);
    }
    for (Phase& p : report_.phases) {
        if (!p.t_end) p.events_at_end = event_count();
    }
    if (report_.lost_records > 0) {
        warnings_.add_first(report_.path + ": incomplete: the recorded process lost " +
                            std::to_string(report_.lost_records) + " record(s) between t=" +
                            seconds_fixed3(report_.lost_first_t) + " s and t=" + seconds_fixed3(report_.lost_last_t) +
                            " s (it ran out of host memory); allocations and frees from then may be missing");
    }
    warn_frames_outside_modules();
    if (observer_ == nullptr) {
        attribute_backward(report_);
    } else {
        report_.backward_pending = !backward_->finish(report_);
        observer_->on_end(report_);
        compact_slots();
    }
    report_.warnings = warnings_.finish();
    return std::move(report_);
}

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

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

namespace {

/// A binary report's records, after its header line.
void read_frames(LineReader& reader, Parser& parser) {
    char letter = 0;
    std::string_view payload;
    uint64_t offset = 0;
    while (parser.wants_more()) {
        switch (reader.next_frame(letter, payload, offset)) {
        case LineReader::Frame: parser.frame(letter, payload, offset); continue;
        case LineReader::NoMoreFrames: return;
        case LineReader::PartialFrame: parser.partial_frame(offset, reader.bytes_read()); return;
        case LineReader::FrameTooLong:
            parser.bad_frame(offset, "record longer than " + std::to_string(LineReader::kMaxLine >> 20) + " MiB");
        case LineReader::BadLength: parser.bad_frame(offset, "bad record length");
        }
    }
}

/// A binary report's records in memory, from `pos` (after its header line).
void read_frames(std::string_view content, size_t pos, Parser& parser) {
    while (pos < content.size() && parser.wants_more()) {
        // A binary report's frames: the letter, the payload's length (a varint), the payload.
        uint64_t length = 0;
        const char* start = content.data() + pos;
        const char* end = content.data() + content.size();
        const char* p = format::get_varint(start + 1, end, &length);
        if (p == nullptr && end - start >= 11) parser.bad_frame(pos, "bad record length");
        if (p != nullptr && length > LineReader::kMaxLine) {
            parser.bad_frame(pos, "record longer than " + std::to_string(LineReader::kMaxLine >> 20) + " MiB");
        }
        if (p == nullptr || length > static_cast<uint64_t>(end - p)) {
            parser.partial_frame(pos, content.size());
            break;
        }
        parser.frame(*start, std::string_view(p, static_cast<size_t>(length)), pos);
        pos = static_cast<size_t>(p - content.data()) + static_cast<size_t>(length);
    }
}

/// Feeds the lines of `file` (named `path` in messages) to `parser` until the end or until it
/// wants no more.
void read_lines(std::FILE* file, const std::string& path, Parser& parser) {
    LineReader reader(file, path);
    std::string_view text;
    size_t line_no = 0;
    while (parser.wants_more()) {
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
        if (parser.binary()) {
            read_frames(reader, parser);
            break;
        }
    }
}

void read_text(std::string_view content, Parser& parser) {
    size_t line_no = 0, pos = 0;
    while (pos < content.size() && parser.wants_more()) {
        ++line_no;
        size_t nl = content.find('\n', pos);
        if (nl == std::string_view::npos) {
            parser.partial_last_line(content.substr(pos), line_no, content.size());
            break;
        }
        parser.line(content.substr(pos, nl - pos), line_no);
        pos = nl + 1;
        if (parser.binary()) break;
    }
    if (parser.binary()) read_frames(content, pos, parser);
}

/// Feeds the lines of the file at `path` to `parser`.
void read_lines(const std::string& path, Parser& parser) {
    std::unique_ptr<std::FILE, FileCloser> file(open_report(path));
    if (!file) throw ReportError(path + ": cannot open: " + std::strerror(errno));
    read_lines(file.get(), path, parser);
}

}  // namespace

Report load_report(const std::string& path) {
    Parser parser(path);
    read_lines(path, parser);
    return parser.finish();
}

Report load_report(std::FILE* file, const std::string& name) {
    Parser parser(name);
    read_lines(file, name, parser);
    return parser.finish();
}

Report stream_report(const std::string& path, EventObserver& observer) {
    Parser parser(path, &observer);
    read_lines(path, parser);
    return parser.finish();
}

Report stream_report(std::FILE* file, const std::string& name, EventObserver& observer) {
    Parser parser(name, &observer);
    read_lines(file, name, parser);
    return parser.finish();
}

Report stream_report_text(std::string_view content, const std::string& name, EventObserver& observer) {
    Parser parser(name, &observer);
    read_text(content, parser);
    return parser.finish();
}

Report parse_report(std::string_view content, const std::string& name) {
    Parser parser(name);
    read_text(content, parser);
    return parser.finish();
}

}  // namespace memguard::report

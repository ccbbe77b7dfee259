#include "report/transcode.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/text.h"
#include "format/binary.h"
#include "format/binary_decode.h"
#include "format/decode.h"
#include "format/encode.h"
#include "report/detail_parts.h"
#include "report/line_reader.h"
#include "report/report.h"

namespace memguard::report {

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

void split(std::string_view line, std::vector<std::string_view>& out) {
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

/// Decodes each record (from text or binary) and writes it in the other encoding.
class Transcoder {
public:
    Transcoder(const std::string& path, Encoding to, const std::function<void(std::string_view)>& write,
               std::vector<std::string>* warnings)
        : path_(path), to_(to), write_(write), warnings_(warnings) {}

    /// Hands what is buffered to the writer.
    void flush() {
        if (!out_.empty()) write_(out_);
        out_.clear();
    }

    void header(std::string_view text, size_t line_no) {
        magic_line_.assign(text.data(), text.size());
        split(text, f_);
        where_ = ":" + std::to_string(line_no);
        const bool text_magic = f_[0] == "MEMGUARD-REPORT", binary_magic = f_[0] == format::kBinaryMagic;
        if ((!text_magic && !binary_magic) || f_.size() < 2) {
            fail("not a memguard report: first line is " + format::quoted(text));
        }
        auto version = text::parse_dec(f_[1]);
        if (binary_magic && version && *version >= static_cast<uint64_t>(format::binary::kVersion1) &&
            *version <= static_cast<uint64_t>(format::binary::kVersion)) {
            binary_decoder_.set_version(static_cast<int>(*version));  // 1 and 2: format major 1
        } else if (binary_magic) {
            fail("binary report encoding version " + format::quoted(f_[1]) + " is not one this memguard reads (" +
                 std::to_string(format::binary::kVersion1) + " to " + std::to_string(format::binary::kVersion) + ")");
        } else if (!version || *version != static_cast<uint64_t>(kFormatVersion)) {
            fail("report format version " + format::quoted(f_[1]) + " is not the one this memguard reads (" +
                 std::to_string(kFormatVersion) + ")");
        }
        binary_in_ = binary_magic;
        // Binary out is the current encoding (binary::kVersion, its Predictions' default).
        out_ += to_ == Encoding::Binary
                    ? std::string(format::kBinaryMagic) + " " + std::to_string(format::binary::kVersion) + "\n"
                    : "MEMGUARD-REPORT " + std::to_string(kFormatVersion) + "\n";
    }
    bool binary_in() const { return binary_in_; }

    void line(std::string_view text, size_t line_no) {
        where_ = ":" + std::to_string(line_no);
        split(text, f_);
        if (f_[0].size() != 1) return;
        dispatch(
            f_[0][0], [&](auto& r) { text_decoder_.read(f_, minor_, r); },
            [&](auto& r) { return text_decoder_.read_head(f_, minor_, r); });
    }

    void frame(char letter, std::string_view payload, uint64_t offset) {
        where_ = ": record at byte " + std::to_string(offset);
        dispatch(
            letter, [&](auto& r) { binary_decoder_.read(payload, minor_, r); },
            [&](auto& r) { return binary_decoder_.read_head(payload, minor_, r); });
    }

    [[noreturn]] void fail(const std::string& what) const { throw ReportError(path_ + where_ + ": " + what); }

    /// A bounded report: the rest of its detail parts, after the spine's last record.
    void finish_detail() {
        if (parts_) read_detail(UINT64_MAX);
    }

private:
    template <class Read, class Head>
    void dispatch(char letter, Read read, Head head) {
        bool done = false;
        std::string_view key;
        bool have_key = false;
        try {
            format::for_each_record([&](auto type) {
                using R = typename decltype(type)::type;
                if (done || R::kLetter != letter || minor_ < R::kMinor) return;
                if constexpr (format::is_keyed<R>()) {
                    if (!have_key) {
                        R h{};
                        key = head(h);
                        have_key = true;
                    }
                    if (key != R::kKey) return;
                }
                R r{};
                read(r);
                done = true;
                write(r);
            });
        } catch (const format::Malformed& m) {
            fail("malformed " + std::string(1, letter) + " record: " + m.what());
        }
    }

    /// A bounded report (docs/bounded-reports.md) is written whole: at each spine `l`, its detail
    /// parts' records up to that position, without the `l` records and the blocks a part repeats.
    void start_detail() {
        parts_.emplace(path_, magic_line_, binary_in_ ? binary_decoder_.version() : 0,
                       [this](std::string w) { warnings_->push_back(std::move(w)); });
    }
    void read_detail(uint64_t position) {
        parts_->read_to(position, [this](const DetailParts::Record& rec) {
            DetailParts& parts = *parts_;
            where_ = " (" + parts.path() +
                     (binary_in_ ? ": record at byte " + std::to_string(rec.offset)
                                 : ":" + std::to_string(parts.line_no())) +
                     ")";
            in_part_ = true;
            known_ = rec.role == DetailParts::Role::Known;
            if (binary_in_) {
                dispatch(
                    rec.letter, [&](auto& r) { parts.binary_decoder().read(rec.payload, minor_, r); },
                    [&](auto& r) { return parts.binary_decoder().read_head(rec.payload, minor_, r); });
            } else {
                split(rec.line, f_);
                if (f_[0].size() == 1) {
                    dispatch(
                        f_[0][0], [&](auto& r) { parts.text_decoder().read(f_, minor_, r); },
                        [&](auto& r) { return parts.text_decoder().read_head(f_, minor_, r); });
                }
            }
            in_part_ = known_ = false;
        });
    }

    template <class R>
    void write(const R& r) {
        if constexpr (std::is_same_v<R, format::rec::DetailAt>) {
            if (in_part_) return;  // not where a part has one: left out
            if (!parts_) start_detail();
            read_detail(r.position);
            return;
        }
        if (known_) return;  // a block the part carries, written where it was allocated
        if constexpr (std::is_same_v<R, format::rec::Info>) {
            if (r.key == "report_limit" && !parts_) start_detail();
            if (r.key == "format_minor") {
                auto minor = text::parse_dec(r.value);
                if (!minor || *minor > 1000000) fail("bad format_minor " + format::quoted(r.value));
                minor_ = static_cast<int>(*minor);
            }
        }
        if (to_ == Encoding::Text) {
            format::encode(r, line_);
            out_.append(line_.finish());
        } else if constexpr (format::is_predicted<R>()) {
            out_.append(format::encode_predicted(r, predictions_, values_, frame_));
        } else {
            out_.append(format::encode_plain(r, frame_));
        }
        if (out_.size() >= kTranscodeChunk) flush();
    }

    const std::string& path_;
    Encoding to_;
    const std::function<void(std::string_view)>& write_;
    std::string out_;
    std::string where_;
    bool binary_in_ = false;
    int minor_ = 0;
    std::vector<std::string_view> f_;
    format::Decoder text_decoder_;
    format::BinaryDecoder binary_decoder_;
    format::binary::Predictions predictions_;
    format::Line line_;
    format::Frame values_, frame_;
    std::vector<std::string>* warnings_;
    std::string magic_line_;
    std::optional<DetailParts> parts_;  // a bounded report's
    bool in_part_ = false, known_ = false;
};

}  // namespace

void transcode(const std::string& path, Encoding to, std::string& out, std::vector<std::string>* warnings) {
    transcode(
        path, to, [&out](std::string_view piece) { out.append(piece); }, warnings);
}

void transcode(const std::string& path, Encoding to, const std::function<void(std::string_view)>& write,
               std::vector<std::string>* warnings) {
    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
    if (!file) throw ReportError(path + ": cannot open: " + std::strerror(errno));
    LineReader reader(file.get(), path);
    auto t = std::make_unique<Transcoder>(path, to, write, warnings);
    std::string_view text;
    size_t line_no = 0;
    while (true) {
        LineReader::Status st = reader.next(text);
        if (st == LineReader::End) break;
        ++line_no;
        if (st == LineReader::TooLong) t->fail("line longer than 16 MiB (corrupt file?)");
        if (st == LineReader::Partial) {
            if (line_no == 1) t->fail("truncated (the header line is incomplete)");
            warnings->push_back(path + ":" + std::to_string(line_no) + ": truncated at byte " +
                                std::to_string(reader.bytes_read()) + " (last record incomplete); left out");
            break;
        }
        if (line_no == 1) {
            t->header(text, 1);
            if (!t->binary_in()) continue;
            char letter = 0;
            std::string_view payload;
            uint64_t offset = 0;
            while (true) {
                const LineReader::FrameStatus fs = reader.next_frame(letter, payload, offset);
                if (fs == LineReader::NoMoreFrames) break;
                if (fs == LineReader::PartialFrame) {
                    warnings->push_back(path + ": truncated at byte " + std::to_string(reader.bytes_read()) +
                                        " (last record incomplete, from byte " + std::to_string(offset) +
                                        "); left out");
                    break;
                }
                if (fs != LineReader::Frame) {
                    t->frame(0, {}, offset);
                    throw ReportError(path + ": record at byte " + std::to_string(offset) +
                                      ": bad record length (corrupt file?)");
                }
                t->frame(letter, payload, offset);
            }
            break;
        }
        t->line(text, line_no);
    }
    if (line_no == 0) throw ReportError(path + ": empty file (not a memguard report)");
    t->finish_detail();
    t->flush();
}

std::optional<std::map<std::string, std::string>> header_info(std::string_view bytes) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;
    const std::string_view first = bytes.substr(0, nl);
    const bool binary = first.rfind(std::string(format::kBinaryMagic) + " ", 0) == 0;
    if (!binary && first.rfind("MEMGUARD-REPORT ", 0) != 0) return std::nullopt;
    std::map<std::string, std::string> info;
    size_t pos = nl + 1;
    try {
        if (binary) {
            format::BinaryDecoder decoder;
            while (pos < bytes.size() && bytes[pos] == 'I') {
                uint64_t length = 0;
                const char* p = format::get_varint(bytes.data() + pos + 1, bytes.data() + bytes.size(), &length);
                if (p == nullptr || length > static_cast<uint64_t>(bytes.data() + bytes.size() - p)) break;
                format::rec::Info r;
                decoder.read(std::string_view(p, static_cast<size_t>(length)), 0, r);
                info[std::string(r.key)] = std::string(r.value);
                pos = static_cast<size_t>(p - bytes.data()) + static_cast<size_t>(length);
            }
        } else {
            format::Decoder decoder;
            std::vector<std::string_view> f;
            while (pos < bytes.size()) {
                const size_t end = bytes.find('\n', pos);
                if (end == std::string_view::npos) break;
                split(bytes.substr(pos, end - pos), f);
                pos = end + 1;
                if (f[0] != "I") break;
                format::rec::Info r;
                decoder.read(f, 0, r);
                info[std::string(r.key)] = std::string(r.value);
            }
        }
    } catch (const format::Malformed&) {
        // What was read stands: the header's look ends at a record it cannot read.
    }
    return info;
}

}  // namespace memguard::report

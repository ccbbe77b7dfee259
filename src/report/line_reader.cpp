#include "report/line_reader.h"

#include <cerrno>
#include <cstring>

#include "format/binary_decode.h"
#include "report/report.h"

namespace memguard::report {

namespace {
constexpr size_t kChunk = size_t{1} << 20;
}

bool LineReader::fill() {
    if (eof_) return false;
    buf_.erase(0, pos_);
    scan_ -= pos_;
    pos_ = 0;
    size_t old = buf_.size();
    buf_.resize(old + kChunk);
    size_t n = std::fread(&buf_[old], 1, kChunk, file_);
    buf_.resize(old + n);
    bytes_read_ += n;
    if (n < kChunk) {
        if (std::ferror(file_)) throw ReportError(name_ + ": cannot read: " + std::strerror(errno));
        eof_ = true;
    }
    return n > 0;
}

LineReader::Status LineReader::next(std::string_view& text) {
    while (true) {
        size_t nl = buf_.find('\n', scan_);
        if (nl != std::string::npos) {
            text = std::string_view(buf_).substr(pos_, nl - pos_);
            pos_ = scan_ = nl + 1;
            return text.size() > kMaxLine ? TooLong : Line;
        }
        scan_ = buf_.size();
        if (scan_ - pos_ > kMaxLine) {
            text = std::string_view(buf_).substr(pos_, kMaxLine);
            return TooLong;
        }
        if (!fill() && eof_) {
            if (pos_ == buf_.size()) return End;
            text = std::string_view(buf_).substr(pos_);
            pos_ = scan_ = buf_.size();
            return Partial;
        }
    }
}

bool LineReader::have(size_t n) {
    while (buf_.size() - pos_ < n) {
        if (!fill() && eof_) return buf_.size() - pos_ >= n;
    }
    return true;
}

LineReader::FrameStatus LineReader::next_frame(char& letter, std::string_view& payload, uint64_t& offset) {
    offset = bytes_read_ - (buf_.size() - pos_);
    if (!have(1)) return NoMoreFrames;
    // The letter and a length of at most 10 bytes; fewer at the file's end.
    have(11);
    const char* start = buf_.data() + pos_;
    const char* end = buf_.data() + buf_.size();
    uint64_t length = 0;
    const char* p = format::get_varint(start + 1, end, &length);
    if (p == nullptr) return end - start < 11 ? PartialFrame : BadLength;
    if (length > kMaxLine) return FrameTooLong;
    const size_t head = static_cast<size_t>(p - start);
    if (!have(head + length)) return PartialFrame;
    letter = buf_[pos_];
    payload = std::string_view(buf_).substr(pos_ + head, length);
    pos_ += head + length;
    scan_ = pos_;
    return Frame;
}

}  // namespace memguard::report

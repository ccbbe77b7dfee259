#include "report/line_reader.h"

#include <cerrno>
#include <cstring>

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

}  // namespace memguard::report

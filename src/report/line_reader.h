// Reads a file line by line, or frame by frame (a binary report's records after its header line),
// in large chunks, without limiting the file size. Internal to the reader.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace memguard::report {

class LineReader {
public:
    static constexpr size_t kMaxLine = size_t{16} << 20;

    enum Status {
        Line,     // a complete line (the '\n' is not part of the text)
        Partial,  // the last line of the file, without a trailing '\n'
        TooLong,  // a line longer than kMaxLine; the text holds its first kMaxLine bytes
        End,      // no more data
    };

    /// `name` is used in error messages. The reader does not own `file`.
    LineReader(std::FILE* file, std::string name) : file_(file), name_(std::move(name)) {}

    /// The next line; the view stays valid until the next call. Throws ReportError on a read error.
    Status next(std::string_view& text);

    /// Bytes read from the file so far.
    uint64_t bytes_read() const { return bytes_read_; }

    enum FrameStatus {
        Frame,         // a complete frame
        PartialFrame,  // the file ends inside a frame
        FrameTooLong,  // a frame's length is over kMaxLine
        BadLength,     // a frame's length is not a varint of at most 64 bits
        NoMoreFrames,  // no more data
    };
    /// The next binary frame (format/binary.h): its letter and payload, valid until the next call;
    /// `offset` is where it starts in the file. Throws ReportError on a read error.
    FrameStatus next_frame(char& letter, std::string_view& payload, uint64_t& offset);

private:
    bool fill();
    /// Reads until buf_ holds `n` bytes from pos_, or the file ends; false when it ends first.
    bool have(size_t n);

    std::FILE* file_;
    std::string name_;
    std::string buf_;
    size_t pos_ = 0;   // start of the next line in buf_
    size_t scan_ = 0;  // buf_ has no '\n' in [pos_, scan_)
    bool eof_ = false;
    uint64_t bytes_read_ = 0;
};

}  // namespace memguard::report

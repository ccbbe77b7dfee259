// A bounded report's detail parts (docs/bounded-reports.md; docs/report-format.md, "Added in
// minor 10"), as its readers meet them: the spine's `l` records say where its records fall among
// the allocations and frees, which the writer put in numbered part files beside it. DetailParts
// finds the parts, opens them in order, checks each one's first line and leading `l`, and hands
// their records out up to the position a spine `l` names, each with its role: a detail record, a
// block the reader already has (a part read after the part before it repeats the live set it began
// with), or a block live at the end of a gap (the parts before were deleted: the reader takes it as
// live). The parser (report/read_detail.cpp) and the transcoder (report/transcode.cpp) read through
// it, each decoding the records with the part's own decoders (a part's binary predictions start
// afresh). Private to report/.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/binary_decode.h"
#include "format/decode.h"
#include "report/line_reader.h"

namespace memguard::report {

/// The numbers N of the files `<spine><suffix>N` beside `spine` (N from 1), in order.
std::vector<unsigned> numbered_beside(const std::string& spine, std::string_view suffix);
/// The numbers of the detail parts beside `spine` (`<spine>.part-<number>`), in order.
std::vector<unsigned> detail_part_numbers(const std::string& spine);
/// "<spine>.part-000003"
std::string detail_part_path(const std::string& spine, unsigned n);

class DetailParts {
public:
    /// The parts beside the spine at `spine` (`<spine>.part-NNNNNN`), which repeat its first line
    /// `magic`; `binary_version`: the binary encoding's (0: text). `warn` gets one line per problem
    /// (a part that cannot be opened, is not one of this report's, or overlaps the one before).
    DetailParts(std::string spine, std::string magic, int binary_version, std::function<void(std::string)> warn);
    ~DetailParts();
    DetailParts(const DetailParts&) = delete;
    DetailParts& operator=(const DetailParts&) = delete;

    enum class Role {
        Detail,   // an allocation or free of the run
        Known,    // a block live at the part's start that the reader read before: decode, do not apply
        Carried,  // a block live at the part's start, after a gap: apply it as live
    };
    struct Record {
        Role role;
        std::string_view line;  // text: the record's line
        char letter;            // binary: the frame's letter, payload and offset in the part
        std::string_view payload;
        uint64_t offset;
    };
    /// Hands out the records of the parts up to detail record `position` (the run's count, over
    /// every part; UINT64_MAX: to the end), in order, decoded by the caller with decoders().
    /// Throws ReportError for a part that cannot be read (a bad frame, a line too long).
    void read_to(uint64_t position, const std::function<void(const Record&)>& feed);

    /// The decoders of the part being read: its records decode with them, not the spine's.
    format::Decoder& text_decoder() { return text_; }
    format::BinaryDecoder& binary_decoder() { return binary_; }
    /// The part being read, and its record's number in it (text: its line), for messages.
    const std::string& path() const { return path_; }
    size_t line_no() const { return line_no_; }

    /// Called when a part is opened, with its number and the role of its carried blocks: before they
    /// are handed out (`done` false) and after (`done` true).
    void on_open(std::function<void(unsigned part, Role carried, bool done)> f) { on_open_ = std::move(f); }
    /// A fold (report/fold.h) covers the parts up to `part`, whose detail ends at record `position`:
    /// those parts are not read, and their records count as folded, not as a gap.
    void skip_through(unsigned part, uint64_t position);
    /// A fold covers the detail before record `position`: a gap there is folded, not missing (the
    /// parts that are there are still read).
    void folded_below(uint64_t position) { folded_ = position; }
    /// Detail records before the fold's position that no part held (folded and deleted), so far.
    uint64_t folded_gap() const { return folded_gap_; }

    /// Part files found beside the spine (those a fold covers left out).
    size_t parts() const { return parts_.size(); }
    /// Detail records the spine counted that no part held (deleted or lost), so far.
    uint64_t gaps() const { return gaps_; }
    /// Detail records read so far (and gaps).
    uint64_t position() const { return position_; }
    /// "<spine>.part-000001"
    std::string part_path(unsigned n) const;

private:
    bool open_next();
    /// The next record of the open part; false at its end (the part is closed).
    bool next(Record& rec);
    void close();
    /// Records up to `to` are not in any part read: a gap (or folded).
    void skip_to(uint64_t to);

    std::string spine_, magic_;
    int binary_version_;
    std::function<void(std::string)> warn_;
    std::vector<unsigned> parts_;
    size_t next_part_ = 0;
    std::FILE* file_ = nullptr;
    std::optional<LineReader> reader_;
    std::string path_;
    size_t line_no_ = 0;
    format::Decoder text_;
    format::BinaryDecoder binary_;
    uint64_t part_position_ = 0, part_carried_ = 0;  // the open part's `l`
    bool carried_pending_ = false;                   // its carried blocks are still to hand out
    uint64_t position_ = 0, gaps_ = 0;
    uint64_t folded_ = 0, folded_gap_ = 0;
    bool gap_ = false;  // the records up to position_ were skipped, not read: the next part's carried blocks are new
    std::function<void(unsigned, Role, bool)> on_open_;
};

}  // namespace memguard::report

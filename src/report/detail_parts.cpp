#include "report/detail_parts.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <dirent.h>

#include "common/text.h"
#include "format/records.h"
#include "report/parser.h"
#include "report/report.h"

namespace memguard::report {

namespace {

constexpr std::string_view kPartSuffix = ".part-";

}  // namespace

std::vector<unsigned> numbered_beside(const std::string& spine, std::string_view suffix) {
    const size_t slash = spine.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : spine.substr(0, slash));
    const std::string prefix = (slash == std::string::npos ? spine : spine.substr(slash + 1)) + std::string(suffix);
    std::vector<unsigned> found;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return found;
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name(e->d_name);
        if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
        const std::optional<uint64_t> n = text::parse_dec(name.substr(prefix.size()));
        if (n && *n > 0 && *n <= 0xffffffffu) found.push_back(static_cast<unsigned>(*n));
    }
    ::closedir(d);
    std::sort(found.begin(), found.end());
    return found;
}

std::vector<unsigned> detail_part_numbers(const std::string& spine) { return numbered_beside(spine, kPartSuffix); }

bool is_detail_part(std::string_view path) {
    const size_t at = path.rfind(kPartSuffix);
    if (at == std::string_view::npos || at == 0 || path.size() - at - kPartSuffix.size() < 6) return false;
    for (char c : path.substr(at + kPartSuffix.size())) {
        if (c < '0' || c > '9') return false;
    }
    return path[at - 1] != '/';
}

DetailParts::DetailParts(std::string spine, std::string magic, int binary_version,
                         std::function<void(std::string)> warn)
    : spine_(std::move(spine)),
      magic_(std::move(magic)),
      binary_version_(binary_version),
      warn_(std::move(warn)),
      parts_(detail_part_numbers(spine_)) {}

DetailParts::~DetailParts() { close(); }

void DetailParts::skip_through(unsigned part, uint64_t position) {
    parts_.erase(parts_.begin(), std::upper_bound(parts_.begin(), parts_.end(), part));
    folded_below(position);
}

std::string detail_part_path(const std::string& spine, unsigned n) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%06u", n);
    return spine + std::string(kPartSuffix) + suffix;
}

std::string DetailParts::part_path(unsigned n) const { return detail_part_path(spine_, n); }

void DetailParts::close() {
    reader_.reset();
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
}

bool DetailParts::next(Record& rec) {
    if (binary_version_ > 0) {
        switch (reader_->next_frame(rec.letter, rec.payload, rec.offset)) {
        case LineReader::Frame: ++line_no_; return true;
        case LineReader::NoMoreFrames: break;
        case LineReader::PartialFrame:
            warn_(path_ + ": truncated at byte " + std::to_string(reader_->bytes_read()) +
                  " (last record incomplete: disk full?); read up to byte " + std::to_string(rec.offset));
            break;
        case LineReader::FrameTooLong:
            throw ReportError(path_ + ": record at byte " + std::to_string(rec.offset) + ": record longer than " +
                              std::to_string(LineReader::kMaxLine >> 20) + " MiB (corrupt file?)");
        case LineReader::BadLength:
            throw ReportError(path_ + ": record at byte " + std::to_string(rec.offset) +
                              ": bad record length (corrupt file?)");
        }
        close();
        return false;
    }
    switch (reader_->next(rec.line)) {
    case LineReader::Line: ++line_no_; return true;
    case LineReader::End: break;
    case LineReader::Partial:
        warn_(path_ + ":" + std::to_string(line_no_ + 1) + ": truncated at byte " +
              std::to_string(reader_->bytes_read()) + " (last record incomplete: disk full?)");
        break;
    case LineReader::TooLong:
        throw ReportError(path_ + ":" + std::to_string(line_no_ + 1) + ": line longer than " +
                          std::to_string(LineReader::kMaxLine >> 20) + " MiB (corrupt file?)");
    }
    close();
    return false;
}

bool DetailParts::open_next() {
    while (next_part_ < parts_.size()) {
        close();
        path_ = part_path(parts_[next_part_++]);
        file_ = open_report(path_);
        if (file_ == nullptr) {
            warn_(path_ + ": cannot open the detail part (" + std::strerror(errno) + "); left out");
            continue;
        }
        reader_.emplace(file_, path_);
        std::string_view first;
        if (reader_->next(first) != LineReader::Line || first != magic_) {
            warn_(path_ + ": not a detail part of this report (its first line is not '" + magic_ + "'); left out");
            continue;
        }
        line_no_ = 1;
        text_ = format::Decoder{};
        if (binary_version_ > 0) binary_.set_version(binary_version_);
        // Its leading `l`: where it starts, and how many live blocks it carries.
        Record rec{};
        format::rec::DetailAt at;
        bool leading = false;
        try {
            if (next(rec)) {
                if (binary_version_ > 0 && rec.letter == format::rec::DetailAt::kLetter) {
                    binary_.read(rec.payload, INT_MAX, at);
                    leading = true;
                } else if (binary_version_ == 0 && rec.line.size() > 1 && rec.line[0] == 'l' && rec.line[1] == ' ') {
                    std::vector<std::string_view> f;
                    split_fields(rec.line, f);
                    text_.read(f, INT_MAX, at);
                    leading = true;
                }
            }
        } catch (const format::Malformed& m) {
            warn_(path_ + ": its l record cannot be read (" + m.what() + "); left out");
            continue;
        }
        if (!leading) {
            warn_(path_ + ": a detail part must begin with its l record; left out");
            continue;
        }
        part_position_ = at.position;
        part_carried_ = at.carried;
        carried_pending_ = true;
        return true;
    }
    close();
    return false;
}

void DetailParts::skip_to(uint64_t to) {
    // What a fold covers is folded, not missing.
    const uint64_t folded_to = std::max(position_, std::min(folded_, to));
    folded_gap_ += folded_to - position_;
    gaps_ += to - folded_to;
    if (to > position_) gap_ = true;
    position_ = to;
}

void DetailParts::read_to(uint64_t position, const std::function<void(const Record&)>& feed) {
    Record rec{};
    for (;;) {
        if (carried_pending_) {
            Role role = Role::Known;
            uint64_t skip = 0;  // detail records of the part that were read before (an overlap)
            if (part_position_ > position_) {
                // The detail before this part is gone: up to `position` nothing is read, and from
                // the part's start its carried blocks are what was live.
                const uint64_t to = std::min(part_position_, position);
                skip_to(to);
                // A part is opened where a record of it is asked for, as after a part read whole:
                // the spine's records at its start come before its carried blocks either way.
                if (to < part_position_ || position == part_position_) return;
            }
            if (part_position_ == position_ && gap_) {
                role = Role::Carried;
            } else if (part_position_ < position_) {
                warn_(path_ + ": its detail starts at record " + std::to_string(part_position_) +
                      ", before the end of the part read before it (" + std::to_string(position_) +
                      "); its repeated records are left out");
                skip = position_ - part_position_;
            }
            carried_pending_ = false;
            const unsigned number = parts_[next_part_ - 1];
            if (on_open_) on_open_(number, role, false);
            for (uint64_t i = 0; i < part_carried_ && reader_ && next(rec); ++i) {
                rec.role = role;
                feed(rec);
            }
            if (on_open_) on_open_(number, role, true);
            for (uint64_t i = 0; i < skip && reader_ && next(rec); ++i) {
                rec.role = Role::Known;
                feed(rec);
            }
        }
        if (position_ >= position) return;
        if (!reader_) {
            if (open_next()) continue;
            // No part left: what the spine counts beyond the parts is missing.
            if (position != UINT64_MAX) skip_to(position);
            return;
        }
        if (next(rec)) {
            ++position_;
            gap_ = false;
            rec.role = Role::Detail;
            feed(rec);
        }
    }
}

}  // namespace memguard::report

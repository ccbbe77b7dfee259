#include "track/report_parts.h"

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

#include "track/file_io.h"
#include "track/packed.h"

namespace memguard::track {

uint64_t ReportParts::part_size_for(uint64_t limit) noexcept {
    const uint64_t eighth = limit / 8;
    return eighth < kMinPartSize ? kMinPartSize : eighth;
}

ReportParts::~ReportParts() { close(); }

std::string ReportParts::part_path(unsigned n) const {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".part-%06u", n);
    return spine_path_ + suffix;
}

bool ReportParts::open(const std::string& spine_path, std::string_view magic, uint64_t spine_bytes) {
    spine_path_ = spine_path;
    magic_.assign(magic.data(), magic.size());
    spine_bytes_ = spine_bytes;
    chunk_.reserve(kChunk);
    format::binary::Predictions fresh;
    failed_ = !start_part(1, fresh);
    return !failed_;
}

bool ReportParts::start_part(unsigned n, format::binary::Predictions& predictions) {
    const std::string path = part_path(n);
    // As the spine: created exclusively, never through a link or in place of a file.
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd_ < 0) return false;
    part_ = n;
    part_bytes_ = 0;
    part_first_ = position_;
    predictions.reset();  // a part is read on its own: its predictions start afresh
    chunk_.clear();
    chunk_.append(magic_);
    encode_record(binary_, format::rec::DetailAt{position_, live_blocks()}, chunk_);
    // The live set, so that a reader of this part needs no earlier one. Not detail records: the
    // position does not move.
    for (const auto& [addr, r] : blocks_) {
        (void)addr;
        encode(r, predictions);
        if (chunk_full() && !write_chunk()) return false;
    }
    for (const auto& [addr, x] : tensors_) {
        (void)addr;
        encode(x.r, predictions);
        if (chunk_full() && !write_chunk()) return false;
    }
    const bool ok = write_chunk();
    carried_bytes_ = part_bytes_;
    return ok;
}

bool ReportParts::write_chunk() {
    if (chunk_.empty()) return true;
    const bool ok = fd_ >= 0 && write_fully(fd_, chunk_.data(), chunk_.size());
    part_bytes_ += chunk_.size();
    chunk_.clear();
    return ok;
}

void ReportParts::before_spine(std::string& spine) {
    if (position_ == spine_position_) return;
    encode_record(binary_, format::rec::DetailAt{position_, 0}, spine);
    spine_position_ = position_;
}

bool ReportParts::drain(format::binary::Predictions& predictions, std::string& spine, int64_t now) {
    if (failed_) return false;
    if (!write_chunk()) {
        failed_ = true;
        return false;
    }
    // A part goes on in a new one at the part size, once it holds a quarter of that beyond the live
    // set it carried (a live set near the part size would otherwise be rewritten at every drain).
    const bool rotate = part_bytes_ >= part_size_ && part_bytes_ - carried_bytes_ >= part_size_ / 4;
    if (rotate) {
        closed_.push_back(Closed{part_, part_bytes_, part_first_, position_, last_t_});
        closed_bytes_ += part_bytes_;
        ::close(fd_);
        fd_ = -1;
    }
    // The limit holds the spine, the closed parts and the part being written, up to its size and
    // one chunk more (it is written a chunk at a time).
    const uint64_t open_part = rotate ? part_size_ : std::max(part_bytes_, part_size_);
    while (!closed_.empty() && spine_bytes_ + spine.size() + closed_bytes_ + open_part + kChunk > limit_) {
        const Closed& c = closed_.front();
        ::unlink(part_path(c.part).c_str());
        before_spine(spine);
        encode_record(binary_, format::rec::DetailDropped{now, c.part, c.first, c.end, c.until}, spine);
        closed_bytes_ -= c.bytes;
        closed_.pop_front();
    }
    if (rotate && !start_part(part_ + 1, predictions)) failed_ = true;
    return !failed_;
}

void ReportParts::close() noexcept {
    if (fd_ >= 0) {
        (void)write_chunk();
        ::close(fd_);
        fd_ = -1;
    }
}

void ReportParts::forget() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    chunk_.clear();
    closed_.clear();
}

}  // namespace memguard::track

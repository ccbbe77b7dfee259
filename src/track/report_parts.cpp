#include "track/report_parts.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
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

bool ReportParts::open(const std::string& spine_path, int spine_fd, std::string_view magic, uint64_t spine_bytes) {
    spine_path_ = spine_path;
    spine_fd_ = spine_fd;
    magic_.assign(magic.data(), magic.size());
    spine_bytes_ = spine_bytes;
    chunk_.reserve(kChunk);
    format::binary::Predictions fresh;
    failed_ = !start_part(1, fresh);
    return !failed_;
}

void ReportParts::restore(uint64_t addr) {
    for (auto it = recently_freed_.rbegin(); it != recently_freed_.rend(); ++it) {
        if (it->addr != addr) continue;
        blocks_[addr] = *it;
        recently_freed_.erase(std::next(it).base());
        return;
    }
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

void ReportParts::look_for_fold(bool newest_only) {
    // The follower folds part k once part k + 2 is there (part_ is the newest part), from its newest
    // fold to the newest it can: the newest fold is usually the first candidate, part_ - 2. Before
    // any fold was seen (no follower), only the newest few candidates are looked at.
    if (newest_only && (part_ < 3 || fold_ >= part_ - 2)) return;
    const int saved = errno;
    struct stat st {};
    char suffix[32];
    auto look = [&](unsigned n) {
        std::snprintf(suffix, sizeof suffix, ".fold-%06u", n);
        return ::stat((spine_path_ + suffix).c_str(), &st) == 0 && S_ISREG(st.st_mode);
    };
    bool found = false;
    unsigned probes = newest_only ? 1 : fold_ == 0 ? 4 : UINT_MAX;
    for (unsigned n = part_ > 2 ? part_ - 2 : 0; n > fold_ && probes > 0 && !found; --n, --probes) {
        if (look(n)) {
            fold_ = n;
            found = true;
        }
    }
    if (newest_only && !found) {
        errno = saved;
        return;
    }
    if (!found && fold_ > 0 && !look(fold_)) st.st_size = 0;  // removed by hand: nothing to count
    fold_bytes_ = found || fold_ > 0 ? static_cast<uint64_t>(st.st_size) : 0;
    errno = saved;
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
    // The limit holds the spine, the fold beside it, the closed parts and the part being written,
    // up to its size and one chunk more (it is written a chunk at a time). The fold is looked for
    // at a rotation and when the limit needs room; at the other drains only the fold the follower
    // writes next (through part_ - 2, once part_ is there), until it is there: one stat.
    const uint64_t open_part = rotate ? part_size_ : std::max(part_bytes_, part_size_);
    const auto over = [&] {
        return spine_bytes_ + spine.size() + fold_bytes_ + closed_bytes_ + open_part + kChunk > limit_;
    };
    if (rotate || (!closed_.empty() && over())) {
        look_for_fold(false);
    } else {
        look_for_fold(true);
    }
    while (!closed_.empty() && over()) {
        // The oldest part goes, folded or not: the bound wins, the host never waits for a fold.
        const Closed& c = closed_.front();
        ::unlink(part_path(c.part).c_str());
        before_spine(spine);
        encode_record(binary_, format::rec::DetailDropped{now, c.part, c.first, c.end, c.until, fold_ >= c.part},
                      spine);
        closed_bytes_ -= c.bytes;
        closed_.pop_front();
    }
    if (rotate) {
        // Everything made for the spine so far goes out before the next part exists (the follower's
        // rule: part N + 2 there, part N + 1 and the spine up to its start are whole).
        if (!spine.empty() && !(spine_fd_ >= 0 && write_fully(spine_fd_, spine.data(), spine.size()))) {
            failed_ = true;
            return false;
        }
        spine_bytes_ += spine.size();
        spine.clear();
        if (!rotated_) follower_requested_ = true;
        rotated_ = true;
        if (!start_part(part_ + 1, predictions)) failed_ = true;
    }
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

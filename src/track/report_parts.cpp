#include "track/report_parts.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/fold_room.h"
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
    prepare_part(fresh);
    failed_ = !start_part(1);
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

void ReportParts::prepare_part(format::binary::Predictions& predictions) {
    predictions.reset();  // a part is read on its own: its predictions start afresh
    chunk_.clear();
    chunk_.append(magic_);
    encode_record(binary_, format::rec::DetailAt{position_, live_blocks()}, chunk_);
    // The live set, so that a reader of this part needs no earlier one. Not detail records: the
    // position does not move. Made whole in memory: the limit makes room for it before the part
    // exists.
    for (const auto& [addr, r] : blocks_) {
        (void)addr;
        encode(r, predictions);
    }
    for (const auto& [addr, x] : tensors_) {
        (void)addr;
        encode(x.r, predictions);
    }
}

bool ReportParts::start_part(unsigned n) {
    const std::string path = part_path(n);
    // As the spine: created exclusively, never through a link or in place of a file.
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd_ < 0) return false;
    part_ = n;
    part_bytes_ = 0;
    part_first_ = position_;
    const bool ok = write_chunk();
    carried_bytes_ = part_bytes_;
    chunk_.shrink_to_fit();  // a large live set made it grow past a chunk
    chunk_.reserve(kChunk);
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

uint64_t ReportParts::counted(uint64_t spine_more, uint64_t open_part) const noexcept {
    return spine_bytes_ + spine_more + std::max(granted_, fold_bytes_) + format::fold_room::kFileBytes + closed_bytes_ +
           open_part + kChunk + kEndBytes;
}

uint64_t ReportParts::size_now(uint64_t spine_more) const noexcept {
    // The room the folds take: the grant, and an eighth more for the next, larger fold (a follower
    // asks for room again as its fold grows); the fold seen beside the report when more.
    const uint64_t folds = std::max(granted_ + granted_ / 8, fold_bytes_);
    const uint64_t rest = spine_bytes_ + spine_more + folds + format::fold_room::kFileBytes + kChunk + kEndBytes;
    // Never under twice the live set the part carried: the carried copy stays at most half of it.
    const uint64_t least = std::min(part_size_, std::max(kMinPartSize, 2 * carried_bytes_));
    if (rest >= limit_) return least;
    return std::clamp((limit_ - rest) / 4, least, part_size_);
}

void ReportParts::delete_oldest(std::string& spine, int64_t now) {
    // The oldest part goes, folded or not: the bound wins, the host never waits for a fold.
    const Closed& c = closed_.front();
    ::unlink(part_path(c.part).c_str());
    before_spine(spine);
    const bool folded = std::max(fold_, promised_) >= c.part;
    encode_record(binary_, format::rec::DetailDropped{now, c.part, c.first, c.end, c.until, folded}, spine);
    closed_bytes_ -= c.bytes;
    closed_.pop_front();
}

void ReportParts::room_for_spine(uint64_t n, std::string& spine, int64_t now) {
    const uint64_t open_part = std::max(part_bytes_, size_now(n));
    if (counted(n, open_part) <= limit_) return;
    look_for_fold(false);
    while (!closed_.empty() && counted(n + spine.size(), open_part) > limit_) delete_oldest(spine, now);
}

bool ReportParts::open_room() {
    const int saved = errno;
    room_fd_ = ::open(format::fold_room::path(spine_path_).c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0640);
    if (room_fd_ < 0) return false;
    const std::string lines = format::fold_room::line(format::fold_room::kGranted, {granted_, promised_}) +
                              format::fold_room::line(format::fold_room::kWanted, {});
    if (!write_fully(room_fd_, lines.data(), lines.size())) {
        ::close(room_fd_);
        room_fd_ = -1;
        ::unlink(format::fold_room::path(spine_path_).c_str());
        return false;
    }
    errno = saved;
    return true;
}

format::fold_room::Room ReportParts::wanted() const noexcept {
    if (room_fd_ < 0) return {};
    char buf[format::fold_room::kFileBytes];
    const ssize_t n = ::pread(room_fd_, buf, sizeof buf, 0);
    if (n <= 0) return {};
    const std::optional<format::fold_room::Room> w = format::fold_room::parse(std::string_view(buf,
                                                                                               static_cast<size_t>(n)),
                                                                              format::fold_room::kWantedAt,
                                                                              format::fold_room::kWanted);
    return w ? *w : format::fold_room::Room{};
}

bool ReportParts::drain(format::binary::Predictions& predictions, std::string& spine, int64_t now) {
    if (failed_) return false;
    if (!write_chunk()) {
        failed_ = true;
        return false;
    }
    // A part goes on in a new one at the size the limit leaves it now (size_now), once it holds a
    // quarter of that beyond the live set it carried (a live set near the part size would otherwise
    // be rewritten at every drain).
    const uint64_t size = size_now(spine.size());
    const bool rotate = part_bytes_ >= size && part_bytes_ - carried_bytes_ >= size / 4;
    if (rotate) {
        closed_.push_back(Closed{part_, part_bytes_, part_first_, position_, last_t_});
        closed_bytes_ += part_bytes_;
        ::close(fd_);
        fd_ = -1;
        prepare_part(predictions);  // the next part's header and live set, in chunk_
    }
    // The limit holds the spine, the room granted to the follower's folds (or the fold seen beside
    // the report, when more: one made by hand), the room file, the closed parts and the part being
    // written, up to its size and one chunk more (it is written a chunk at a time; a new part from
    // the start: its live set may be more than a part), and the end record. The fold is looked for
    // at a rotation and when the limit needs room; at the other drains only the fold the follower
    // writes next (through part_ - 2, once part_ is there), until it is there: one stat.
    const uint64_t open_part = rotate ? std::max<uint64_t>(chunk_.size(), size) : std::max(part_bytes_, size);
    // The follower's folds want more room: granted when the limit holds it with every closed part
    // deleted, and said only once the parts it needs are gone (a grant is never taken back). The
    // fold it is for is made (in the follower's memory): the parts it covers are deleted folded.
    const format::fold_room::Room want = wanted();
    const uint64_t granted_before = granted_;
    if (want.bytes > granted_ &&
        counted(spine.size(), open_part) - closed_bytes_ - std::max(granted_, fold_bytes_) + want.bytes <= limit_) {
        granted_ = want.bytes;
        promised_ = std::max(promised_, want.part);
    }
    if (rotate || (!closed_.empty() && counted(spine.size(), open_part) > limit_)) {
        look_for_fold(false);
    } else {
        look_for_fold(true);
    }
    while (!closed_.empty() && counted(spine.size(), open_part) > limit_) delete_oldest(spine, now);
    if (granted_ != granted_before) {
        const std::string line = format::fold_room::line(format::fold_room::kGranted, {granted_, promised_});
        // A grant not said is no harm: it is counted all the same, and asked for again.
        (void)!::pwrite(room_fd_, line.data(), line.size(), format::fold_room::kGrantedAt);
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
        if (!start_part(part_ + 1)) failed_ = true;
    }
    return !failed_;
}

void ReportParts::close() noexcept {
    if (fd_ >= 0) {
        (void)write_chunk();
        ::close(fd_);
        fd_ = -1;
    }
    // The room file stays: the follower reads the last grant, and removes it after its last fold.
    if (room_fd_ >= 0) ::close(room_fd_);
    room_fd_ = -1;
}

void ReportParts::forget() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (room_fd_ >= 0) ::close(room_fd_);  // the parent's follower's
    room_fd_ = -1;
    chunk_.clear();
    closed_.clear();
}

}  // namespace memguard::track

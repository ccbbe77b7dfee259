// A bounded report's files (MEMGUARD_MAX_REPORT_SIZE; docs/bounded-reports.md): the writer thread
// splits what it writes into the spine (the report path: every record but the allocations and
// frees) and numbered detail parts (the A F T t records), and deletes the oldest part when the
// files would pass the limit, counting in it the room granted to the folds beside the report
// (`<report>.fold-N`, written by `memguard compact --follow` within that room: format/fold_room.h),
// or the fold seen there when it is more (one made by hand). Each part begins with the blocks live at its start (carried),
// so a reader needs no earlier part; `l` records in the spine say where its records fall among the
// detail records. Before a part is created, everything made for the spine so far is in the spine
// file: a follower that sees part N + 2 knows that part N + 1 is whole and that the spine holds
// every record up to its start (docs/bounded-reports.md, "The follower"). Writer-thread only: every
// call is made under the writer's io lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "format/binary.h"
#include "format/encode.h"
#include "format/fold_room.h"
#include "format/records.h"

namespace memguard::track {

class ReportParts {
public:
    /// The smallest part: a limit below 8 parts of it still rotates at this size.
    static constexpr uint64_t kMinPartSize = uint64_t{64} << 10;
    /// The part size for `limit`: an eighth of it, at least kMinPartSize.
    static uint64_t part_size_for(uint64_t limit) noexcept;

    /// `limit`: the bound on the spine and the parts together; `part_size`: where a part ends.
    ReportParts(uint64_t limit, uint64_t part_size, bool binary) noexcept
        : limit_(limit), part_size_(part_size), binary_(binary) {}
    ~ReportParts();
    ReportParts(const ReportParts&) = delete;
    ReportParts& operator=(const ReportParts&) = delete;

    uint64_t limit() const noexcept { return limit_; }
    /// The part size asked for (set_part_size, or part_size_for(limit)): the most a part holds.
    uint64_t part_size() const noexcept { return part_size_; }
    /// Where the part being written ends now, with `spine_more` bytes more for the spine: the part
    /// size while the limit holds four parts of it beside the spine and the folds' room, else a
    /// quarter of what they leave (never under kMinPartSize, nor under twice the live set the part
    /// carried). A fold through part N waits for part N + 2 and the part after it is begun: four
    /// parts at once keep every part folded as the spine grows (docs/bounded-reports.md, "Size and cost").
    uint64_t size_now(uint64_t spine_more) const noexcept;

    /// Opens the first part beside `spine_path`, whose file (`spine_fd`, which the writer keeps
    /// open) already holds `spine_bytes` (the header); `magic` is the header's first line (with its
    /// '\n'), which every part repeats. False (errno set) when the part cannot be created.
    bool open(const std::string& spine_path, int spine_fd, std::string_view magic, uint64_t spine_bytes);

    /// The detail: a predicted record (A F T t), encoded against `predictions` (the part's: reset
    /// at each new part) into the part's chunk; the live set follows it.
    template <class R>
    void detail(const R& r, format::binary::Predictions& predictions);
    /// Before any bytes go to the spine: appends an `l` record to `spine` when detail records came
    /// since the spine's last one.
    void before_spine(std::string& spine);
    /// `n` bytes went to the spine file.
    void wrote_spine(uint64_t n) noexcept { spine_bytes_ += n; }

    /// Before `n` bytes go to the spine file outside drain(): deletes the oldest parts the limit has
    /// no room for, appending their `f` records to `spine` (which goes to the spine file after the
    /// `n` bytes: the caller counts both with wrote_spine). Arithmetic only while there is room.
    void room_for_spine(uint64_t n, std::string& spine, int64_t now);

    /// Creates the fold room beside the report (format/fold_room.h), for the follower about to
    /// start: false (errno set) when it cannot (a file of that name is there).
    bool open_room();
    /// The room granted to the follower's fold files (never taken back).
    uint64_t granted() const noexcept { return granted_; }

    /// Writes the part's chunk out; once the part has reached the part size, goes on in a new part
    /// (carrying the live set) and deletes the oldest parts the limit has no room for, appending
    /// their `f` records to `spine`. Grants the follower's folds the room they want (the fold
    /// room's `wanted`) when the limit can hold it. Before the new part is created, `spine` is written to the spine
    /// file (and emptied). False when a write failed (errno set; failed() stays true). `now`: the
    /// time of `f`.
    bool drain(format::binary::Predictions& predictions, std::string& spine, int64_t now);
    bool failed() const noexcept { return failed_; }
    /// Room left in the chunk before a record must drain it.
    bool chunk_full() const noexcept {
        return chunk_.size() + std::max(format::Line::kCapacity, format::Frame::kCapacity) > kChunk;
    }

    /// Closes the part (the end of the run).
    void close() noexcept;
    /// In a fork's child: closes the parent's part without writing to it.
    void forget() noexcept;

    uint64_t position() const noexcept { return position_; }
    unsigned part() const noexcept { return part_; }
    /// True once, after the first rotation: the time to start the follower that folds the parts
    /// (follower.h; the writer thread starts it, never a hook).
    bool take_follower_request() noexcept {
        const bool r = follower_requested_;
        follower_requested_ = false;
        return r;
    }
    /// The newest fold seen beside the report (its number: it covers parts 1 .. fold(); 0: none), and
    /// its size, as the limit counts it.
    unsigned fold() const noexcept { return fold_; }
    uint64_t fold_bytes() const noexcept { return fold_bytes_; }
    size_t live_blocks() const noexcept { return blocks_.size() + tensors_.size(); }
    /// An `R` (a free that failed: the block is live again) for `addr`, freed among the last
    /// kRecentFrees frees: the block is in the live set the next part carries again.
    void restore(uint64_t addr);

    /// A run of spine records (text lines or binary frames, whole) on its way to the spine: the
    /// step moments' tags that say again what a tensor block was told already are left out, and
    /// their moment's `k` counts the tags written (docs/bounded-reports.md, "Repeated tags").
    /// False when the run goes as it is; true with what goes in its place in `out`.
    bool leave_out_repeated_tags(std::string_view run, std::string& out);

private:
    static constexpr size_t kChunk = 64 << 10;
    static constexpr size_t kEndBytes = 64;      // the spine's last records (`l`, the end) at finish
    static constexpr size_t kRecentFrees = 256;  // the recorder writes an R right after its F
    struct LiveTensor {
        format::rec::TensorAlloc r;
        char pool[64];  // "first.second": two 64-bit numbers and a dot fit
        uint64_t at = 0;         // the position of its T record
        uint64_t told_at = 0;    // the position of the `h` of the moment whose tag gave it `told`
        uint8_t told = kUntold;  // the least category the step moments' tags gave it (enum order)
    };
    static constexpr uint8_t kUntold = 0xff;
    /// An open step moment (report_parts_tags.cpp): where its `h` stood, where the part it stands in
    /// began, and the tags left out.
    struct OpenMoment {
        uint64_t at = 0, part_first = 0;
        uint64_t left_out = 0;
    };
    /// What one `h`, `g` or `k` record (`letter`, its text line without the newline or its binary
    /// payload) makes of the repeated tags: true to leave it out; a `k` that counts left-out tags is
    /// made again into `rewritten` (else that stays empty).
    bool repeated_tag(char letter, std::string_view record, std::string& rewritten);
    std::string part_path(unsigned n) const;
    /// A new part's header, `l` and live set, made in chunk_ (its size is what the limit makes room for).
    void prepare_part(format::binary::Predictions& predictions);
    /// Creates part `n` and writes what prepare_part made.
    bool start_part(unsigned n);
    /// What the limit counts, with `spine_more` bytes more for the spine and `open_part` for the
    /// part being written.
    uint64_t counted(uint64_t spine_more, uint64_t open_part) const noexcept;
    /// Deletes the oldest closed part, its `f` record appended to `spine`.
    void delete_oldest(std::string& spine, int64_t now);
    /// The follower's `wanted` in the fold room (none said, or no room file: 0 bytes).
    format::fold_room::Room wanted() const noexcept;
    bool write_chunk();
    /// Looks for the newest fold beside the report (a stat per candidate, newest first; never on a
    /// hook's path: at a rotation, or when the limit needs room) and notes its number and size.
    /// `newest_only`: only the fold the follower writes next, when it is not seen yet (one stat).
    void look_for_fold(bool newest_only);
    template <class R>
    void encode(const R& r, format::binary::Predictions& predictions);

    const uint64_t limit_;
    const uint64_t part_size_;
    const bool binary_;
    bool failed_ = false;
    std::string spine_path_;
    std::string magic_;
    int spine_fd_ = -1;  // the writer's
    int fd_ = -1;
    unsigned part_ = 0;
    uint64_t part_bytes_ = 0;
    uint64_t carried_bytes_ = 0;  // the part's header and the live set it began with
    uint64_t part_first_ = 0;     // the position of the part's first detail record
    int64_t last_t_ = 0;          // the time of the last detail record
    struct Closed {
        unsigned part;
        uint64_t bytes, first, end;
        int64_t until;  // the time of its last detail record
    };
    std::deque<Closed> closed_;
    uint64_t closed_bytes_ = 0;
    unsigned fold_ = 0;        // the newest fold seen (look_for_fold)
    uint64_t fold_bytes_ = 0;  // its size
    int room_fd_ = -1;         // the fold room, once the follower is started
    uint64_t granted_ = 0;     // the room granted to the follower's folds
    unsigned promised_ = 0;    // the fold the newest grant was for: made, if not written yet
    bool follower_requested_ = false;
    bool rotated_ = false;  // a part was closed already
    uint64_t spine_bytes_ = 0;
    uint64_t position_ = 0;        // detail records so far
    uint64_t spine_position_ = 0;  // the position the spine was last told
    std::string chunk_;
    format::Frame values_, frame_;
    std::unordered_map<uint64_t, format::rec::Alloc> blocks_;
    std::deque<format::rec::Alloc> recently_freed_;  // the blocks of the last kRecentFrees frees
    std::unordered_map<uint64_t, LiveTensor> tensors_;
    std::unordered_map<uint32_t, OpenMoment> step_moments_;  // by moment id
};

template <class R>
void ReportParts::encode(const R& r, format::binary::Predictions& predictions) {
    if (binary_) {
        chunk_.append(format::encode_predicted(r, predictions, values_, frame_));
    } else {
        format::Line line;
        format::encode(r, line);
        chunk_.append(line.finish());
    }
}

template <class R>
void ReportParts::detail(const R& r, format::binary::Predictions& predictions) {
    static_assert(format::is_predicted<R>());
    // The live set first: a map that cannot grow (out of host memory) throws before the record is
    // encoded, so the record is lost whole, not written without its block.
    if constexpr (std::is_same_v<R, format::rec::Alloc>) {
        blocks_[r.addr] = r;
    } else if constexpr (std::is_same_v<R, format::rec::Free>) {
        if (auto it = blocks_.find(r.addr); it != blocks_.end()) {
            if (recently_freed_.size() == kRecentFrees) recently_freed_.pop_front();
            recently_freed_.push_back(it->second);
            blocks_.erase(it);
        }
    } else if constexpr (std::is_same_v<R, format::rec::TensorAlloc>) {
        LiveTensor& x = tensors_[r.addr];
        x.r = r;
        x.at = position_;
        x.told = kUntold;
        const size_t n = r.pool.size() < sizeof x.pool ? r.pool.size() : sizeof x.pool;
        r.pool.copy(x.pool, n);
        x.r.pool = std::string_view(x.pool, n);
    } else if constexpr (std::is_same_v<R, format::rec::TensorFree>) {
        tensors_.erase(r.addr);
    }
    encode(r, predictions);
    ++position_;
    last_t_ = r.t;
}

}  // namespace memguard::track

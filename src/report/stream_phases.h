// The figures of phases and marks (report/timeline.h: phase_stats, live_at_mark) folded in the
// streaming reader's one pass (report/stream.h), in memory that grows with the phases and marks
// (their figures) and the phases open at once, not with the number of events.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "report/levels.h"
#include "report/stream.h"
#include "report/timeline.h"

namespace memguard::report {

/// phase_stats(r, build_timeline(r), series) and live_at_mark for every mark, for both series (GPU
/// bytes and allocator mode's tensor bytes), from the events as they are read: the same figures as
/// over Report::events.
///
/// The open phases (of every thread) are kept in order of begin; each holds the highest level of
/// its own stretch, from its begin to the next open phase's. At its end a phase's peak is the
/// highest over its stretch and the later ones (a tree over the open phases: O(log) for a phase
/// that ends, whatever their order), then its stretch joins the previous open phase's. Each event
/// costs O(1); each B or b O(log open phases), amortized (the tree is rebuilt as it fills).
class PhaseObserver : public EventObserver {
public:
    bool on_event(const Report& r, const Event& e) override;
    bool share_walk(const LevelWalk& walk) override { return walk_.share(walk); }
    void before(const Report& r, const Event& e) override;
    void on_phase(const Report& r, size_t phase) override;
    void on_end(const Report& r) override;
    /// A fold holds each phase's figures so far (a closed phase's whole, an open one's entry) and the
    /// open phases' stretches with their highest points; the marks' levels.
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;

    /// One entry per phase, in order of B records, as phase_stats gives them; after the read.
    const std::vector<PhaseStats>& stats(Series series) const { return series_[index(series)].stats; }
    /// The bytes of `series` at each mark of Report::marks, in order (live_at_mark); after the read.
    const std::vector<uint64_t>& mark_levels(Series series) const { return series_[index(series)].marks; }

private:
    static size_t index(Series s) { return s == Series::Tensors ? 1 : 0; }

    /// The highest level over a stretch of points, and the first point that reached it.
    struct Best {
        static constexpr size_t kEmpty = SIZE_MAX;
        uint64_t bytes = 0;
        size_t events = kEmpty;  // the prefix of events at that point; kEmpty: no point
        int64_t t = 0;           // the time of its last event
        /// `later` follows this stretch: it wins only when strictly higher.
        static Best join(const Best& earlier, const Best& later) {
            if (earlier.events == kEmpty) return later;
            if (later.events == kEmpty) return earlier;
            return later.bytes > earlier.bytes ? later : earlier;
        }
    };

    struct PerSeries {
        std::vector<PhaseStats> stats;
        std::vector<uint64_t> marks;
        /// The stretch of the last open phase, which grows with each event; its slot in `tree`
        /// stays empty.
        Best current;
        /// A tree of maxima over the slots of the open phases (bottom-up, any size): leaves at
        /// [capacity_, 2 capacity_).
        std::vector<Best> tree;
    };

    uint64_t level(size_t s) const;
    Best point(size_t s) const;
    void catch_up_marks(const Report& r);
    void begin(const Report& r, size_t phase);
    void end(const Report& r, size_t phase);
    // The tree (the same slots for both series).
    void set_leaf(PerSeries& s, size_t slot, const Best& b);
    Best suffix(const PerSeries& s, size_t slot) const;
    size_t take_slot();

    WalkRef walk_;
    int64_t last_t_ = 0;  // of the last event applied (0 before the first)
    std::array<PerSeries, 2> series_;
    size_t marks_seen_ = 0;
    size_t capacity_ = 0;            // leaves of each tree
    size_t next_slot_ = 0;           // slots are given in order of begin, so that a suffix is the later phases
    std::map<size_t, size_t> open_;  // open phase -> its slot
    /// Depth and parent: NVTX push/pop and API phases nest per thread, NVTX start/end ranges among
    /// themselves (phase_stats' families).
    std::map<std::pair<bool, uint64_t>, std::set<size_t>> families_;
    std::map<std::string, uint32_t> seen_;  // name -> phases so far
};

}  // namespace memguard::report

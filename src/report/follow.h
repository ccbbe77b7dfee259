// Folding a bounded report while its run writes it (`memguard compact --follow`;
// docs/bounded-reports.md, "The follower"): the parts are folded (report/fold.h: compact_report) as
// they close, each fold going on from the one before, so that the parts the writer deletes to keep
// its limit have their figures kept; after a last fold it returns once the report is complete (its
// end record) or its writer (the header's `I pid`) is gone.
//
// What it folds: through part N only once part N + 2 is there, or the report is complete. The
// writer creates a part only after it has written everything made for the spine so far
// (track/report_parts.h), and part N + 1 is whole once part N + 2 exists (its carried live set and
// its detail are written before the next part is created): so a fold never reads a part, nor a
// spine record before the fold's place, that the writer is still writing. The writer writes the end
// record once every part is closed: then the fold goes through the newest part but one. A writer
// gone without its end record leaves the newest part possibly cut short: the last fold goes through
// the newest part but two.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "format/fold_room.h"

namespace memguard::report {

struct FollowOptions {
    int poll_ms = 250;  // how often it looks at the parts, the spine's end and the writer
    /// One line per fold written (compact_report's message).
    std::function<void(const std::string&)> said;
};

struct FollowResult {
    unsigned part = 0;      // the newest fold covers parts 1 .. part (0: none)
    unsigned folds = 0;     // folds written
    bool complete = false;  // the report's end record was read (else its writer was gone)
};

/// The follower's side of the fold room (format/fold_room.h; docs/bounded-reports.md, "The fold's
/// room"): a fold is written only where the limit has room for it beside the folds there (both are
/// there while it is put in place). While the writer runs, that room is the one it granted, and
/// more is asked for (an eighth more than the fold needs); once it is done (its end record written,
/// or gone), the files change through the follower only: they are measured against the limit.
class FoldRoom {
public:
    explicit FoldRoom(const std::string& spine);
    ~FoldRoom();
    FoldRoom(const FoldRoom&) = delete;
    FoldRoom& operator=(const FoldRoom&) = delete;

    /// Whether the fold through `part`, of `bytes`, may be written now; when not, and the writer
    /// runs, the room it needs is asked for.
    bool fits(uint64_t bytes, unsigned part, bool writer_done, uint64_t limit);
    /// Removes the room file (after the last fold).
    void remove();

private:
    bool open();
    uint64_t granted();

    std::string spine_, path_;
    int fd_ = -1;
    uint64_t granted_ = 0;
    format::fold_room::Room wanted_;
};

/// Follows the bounded report at `spine` until it is complete or its writer is gone. Throws
/// ReportError when the report cannot be read (not a bounded report, no `I pid`), or when a fold
/// fails for good: at the end, or three times running (a fold that fails leaves the one before in
/// place; one that fails while the writer runs is tried again at the next look).
FollowResult follow_report(const std::string& spine, const FollowOptions& options);

/// Whether the process `pid` that began writing a report at `t0_unix_ns` (its header's
/// `I t0_unix_ns`; 0: not known) still runs: kill(pid, 0), and a process of that pid started after
/// the report began is another one (the pid reused).
bool writer_alive(long pid, long long t0_unix_ns);

}  // namespace memguard::report

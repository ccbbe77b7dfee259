// The report a command names, read by the streaming reader as many times as the command needs
// (docs/architecture.md, "The streaming reader"), a pipe included.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <sys/types.h>

#include "report/report.h"
#include "report/stream.h"

namespace memguard::cli {

/// A report named on the command line. A regular file is read where it is, as often as asked. Anything
/// else (a pipe: `memguard summary <(zcat r.mgr.gz)`, `cat r.mgr | memguard top /dev/stdin`) can be
/// read only once: the first pass reads it through the streaming reader and, as it reads, copies it
/// to a *spool*, an unnamed temporary file in $TMPDIR (an absolute path; else /tmp): O_TMPFILE, or
/// where the file system has none, mkostemp (O_EXCL, mode 0600, never through a planted link) and
/// unlink at once. Later passes and load() read the spool, and then what the pipe still holds. The
/// spool has no name, so it is freed when this is destroyed or the process ends in any way (an error,
/// a signal); it holds what was read of the report, at most its size.
///
/// When the spool cannot be created (no such directory, no permission) or written (a full disk, a
/// file size limit), the report is read whole by load_report, with one line on stderr saying so:
/// stream() gives nothing, and the command calls load().
class ReportInput {
public:
    explicit ReportInput(std::string path);
    ~ReportInput();
    ReportInput(const ReportInput&) = delete;
    ReportInput& operator=(const ReportInput&) = delete;

    const std::string& path() const { return path_; }

    /// The first pass: the report streamed to `observer` (report::stream_report). Nothing when a pipe
    /// could not be spooled (the one line said so): load() reads it whole then. Throws ReportError as
    /// stream_report does.
    std::optional<report::Report> stream(report::EventObserver& observer);
    /// A later pass, once stream() gave a report: the file again, or the spool.
    report::Report again(report::EventObserver& observer);
    /// The report read whole (load_report): the file; else what the spool holds, then the rest of the pipe.
    report::Report load();

private:
    struct Cursor;
    /// A FILE that reads the spool from its start, then the pipe (copying to the spool while it can).
    std::FILE* open_cursor();
    /// Reads up to `size` bytes for the cursor at `*pos`; the read function of open_cursor's FILE.
    ssize_t read_at(uint64_t& pos, char* buf, size_t size);
    void spool_failed(const std::string& why);

    std::string path_;
    bool file_ = false;          // a regular file: read where it is
    std::FILE* pipe_ = nullptr;  // otherwise, once opened
    bool pipe_end_ = false;      // the pipe said end of file
    int spool_ = -1;             // the spool's descriptor
    bool copying_ = false;       // reads from the pipe are copied to the spool
    bool failed_ = false;        // a write to the spool failed in the first pass
    bool warned_ = false;
    uint64_t pipe_pos_ = 0;  // bytes read from the pipe
    uint64_t spooled_ = 0;   // bytes in the spool: [0, spooled_) of the report
    std::string held_;       // then [spooled_, spooled_ + size): read, but a write to the spool failed
};

}  // namespace memguard::cli

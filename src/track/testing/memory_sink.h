// A sink that keeps reports in memory, for tests of the recorder. It behaves like the report file
// (writer.h) where tests look: a report starts with its header; records come out in the order
// they were appended, whole lines, packed ones formatted (after the clock's anchor) when written
// out; a flush writes out what was appended with a heartbeat, after a U record when records were
// lost; finish adds the end record. What is appended stays pending until a flush or finish, as it
// stays in the writer's buffer. A fork child's report is a new one: the parent's stays as it was.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "track/event_sink.h"

namespace memguard::track::testing {

class MemorySink final : public EventSink {
public:
    explicit MemorySink(Clock& clock) : clock_(clock) {}

    bool start(const std::string& path, const std::string& name_in_directory, std::string_view header,
               std::string* error) override;
    const std::string& path() const override;
    void append(std::string_view records) noexcept override;
    void append_packed(PackedFormat format, const void* payload, uint32_t bytes) noexcept override;
    void add_lost(uint64_t records) noexcept override;
    void flush() override;
    void finish() override;
    void lock_for_fork() override { mu_.lock(); }
    void unlock_after_fork() override { mu_.unlock(); }
    void reset_in_child() override;

    // --- for tests ---------------------------------------------------------------------------
    /// The next start() fails with `error`.
    void fail_next_start(std::string error);
    /// Reports started so far (one per start; a fork child starts another).
    size_t report_count() const;
    /// What was written out of report `i` (the last one by default): its header and every record
    /// flushed so far.
    std::string text(size_t i) const;
    std::string text() const;
    /// The path report `i` was started with.
    std::string path_of(size_t i) const;
    /// Records appended and not written out yet (a packed one counts one).
    size_t pending() const;

private:
    struct Entry {
        std::string text;               // a text record, or empty for a packed one
        PackedFormat format = nullptr;  // a packed record's formatter
        std::string payload;
    };
    struct Report {
        std::string path;
        std::string text;
    };
    /// With mu_ held: writes out the pending records (after a U record and a heartbeat).
    void write_pending_locked(bool heartbeat);

    Clock& clock_;
    mutable std::mutex mu_;
    std::vector<Report> reports_;
    bool started_ = false;  // the last of reports_ is this sink's report
    bool finished_ = false;
    std::vector<Entry> pending_;
    uint64_t lost_ = 0;  // lost and not yet reported in a U record
    int64_t lost_since_ = 0;
    std::string fail_next_;
    std::string empty_;
};

}  // namespace memguard::track::testing

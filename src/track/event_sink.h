// Where the recorder's records go: what the recorder needs of a report's destination. The report
// file (writer.h, ReportWriter) is the one in production; tests record into memory
// (testing/memory_sink.h). A sink writes records in the order they were appended, after the
// header it was started with, as whole lines.
//
// Thread safety: append, append_packed and add_lost from any thread at any time, without
// blocking on I/O; the others from one thread at a time (the recorder's start mutex or fork
// handlers hold it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memguard::track {

class Clock;
class PackedOut;

class EventSink {
public:
    virtual ~EventSink() = default;

    /// Starts the report at `path` (`name_in_directory`: its name when `path` is a directory)
    /// with `header` as its first lines. On failure returns false and sets *error (one line).
    virtual bool start(const std::string& path, const std::string& name_in_directory, std::string_view header,
                       std::string* error) = 0;
    /// Where the report went; empty before start.
    virtual const std::string& path() const = 0;

    /// The report's encoding: binary frames (format/binary.h) or text lines. Set before start;
    /// records are appended in it (a text sink is given text, a binary one frames).
    bool binary() const noexcept { return binary_; }
    void set_binary(bool binary) noexcept { binary_ = binary; }
    /// The allocation and free records (A F T t) go packed (append_packed): in a binary report,
    /// and in a bounded one (its writer routes them to the detail parts: track/report_parts.h).
    bool packs() const noexcept { return binary_ || packs_detail_; }

    /// Appends complete records (in text, a missing last '\n' is added). Never throws: records
    /// that cannot be kept are counted as lost.
    virtual void append(std::string_view records) noexcept = 0;

    /// Formats a packed record's payload (`bytes` of it) into `out` (track/packed.h: the record in
    /// the report's encoding, at most format::Line::kCapacity bytes); stamps in it are turned into
    /// times with out.clock. Runs on the thread that writes the records out, after clock.anchor(),
    /// in the records' order: the binary encoding's predictions follow that order.
    using PackedFormat = void (*)(const unsigned char* payload, uint32_t bytes, PackedOut& out);
    static constexpr uint32_t kMaxPackedBytes = 128;
    /// Appends one record as a payload of `bytes` (at most kMaxPackedBytes) and the function that
    /// formats it when it is written out; ordered with append()'s records as if formatted here.
    virtual void append_packed(PackedFormat format, const void* payload, uint32_t bytes) noexcept = 0;

    /// Counts `records` lost before they reached the sink (made before the report existed); the
    /// report says how many in a `U` record, like the sink's own losses.
    virtual void add_lost(uint64_t records) noexcept = 0;

    /// Writes out everything appended so far.
    virtual void flush() = 0;
    /// Appends the end record and writes everything; nothing is appended after.
    virtual void finish() = 0;

    // fork(2): the prepare/parent pair brackets fork in the parent (the sink's locks are taken,
    // last in the recorder's lock order); in the child, after unlock_after_fork, the sink forgets
    // the parent's report: the child's report is another one, started afresh.
    virtual void lock_for_fork() = 0;
    virtual void unlock_after_fork() = 0;
    virtual void reset_in_child() = 0;

protected:
    bool binary_ = false;
    bool packs_detail_ = false;
};

}  // namespace memguard::track

// The report file and its writer thread: the recorder's sink in production (event_sink.h). Hooks
// only append whole records to an in-memory buffer; a background thread writes the buffer at least
// every kFlushInterval, with a heartbeat record, so that a killed process leaves a file that is
// valid up to the last flush.
//
// The records written on every tensor allocation and free (allocator mode's T and t), and in a
// binary report interposition mode's A and F, are appended packed: their numbers and the function
// that formats them, so that the hook does not spend its time on digits (nor its cache on a wide
// record). The writer thread encodes them in buffer order (text, or binary against the
// predictions it keeps: format/binary.h), so the file is the same as if the hook had encoded
// them. In a binary report every other record arrives as a frame, and the buffer is walked by
// frames instead of lines.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "common/futex_lock.h"
#include "format/binary.h"
#include "format/encode.h"
#include "track/byte_buffer.h"
#include "track/event_sink.h"
#include "track/file_io.h"
#include "track/report_parts.h"

namespace memguard::track {

class Clock;

class ReportWriter final : public EventSink {
public:
    /// `clock` gives the times of the writer's own records and converts packed records' stamps.
    explicit ReportWriter(Clock& clock) : clock_(clock) {}

    /// Creates the report file, writes `header` to it before returning (so that a process that
    /// ends before the first flush, by _exit or a signal, still leaves a file a reader takes) and
    /// starts the writer thread. The file is created exclusively (O_EXCL|O_NOFOLLOW, mode 0640),
    /// never in place of what has the name: a regular file there, path.1 ... path.99 are tried; a
    /// directory there (or `path` ending in '/'), the file is `name_in_directory` inside it; a
    /// symbolic link, device, FIFO or socket there, no file is created. On failure returns false
    /// and sets *error (one line).
    bool start(const std::string& path, const std::string& name_in_directory, std::string_view header,
               std::string* error) override;

    /// Keeps the report's files under `bytes` (MEMGUARD_MAX_REPORT_SIZE; 0, the default: one file,
    /// no limit): a bounded report is a spine at the path and detail parts beside it
    /// (report_parts.h). Before start().
    void set_limit(uint64_t bytes) noexcept {
        limit_ = bytes;
        packs_detail_ = bytes > 0;
    }
    /// The size at which the detail goes on in a new part; 0 (the default): the limit's
    /// (ReportParts::part_size_for). A test's smaller parts. Before start().
    void set_part_size(uint64_t bytes) noexcept { part_size_ = bytes; }
    /// Whether a bounded report starts its follower (follower.h) at its first rotation
    /// (MEMGUARD_FOLD), and the memguard program it runs (MEMGUARD_CLI; "": the one beside the
    /// library). Before start().
    void set_follower(bool on, std::string cli) {
        follow_ = on;
        follower_cli_ = std::move(cli);
    }
    /// The follower's pid (the child the writer spawned, which forks the follower and exits); 0:
    /// none started.
    pid_t follower_pid() const noexcept { return follower_pid_; }

    bool started() const { return fd_ >= 0; }
    const std::string& path() const override { return path_; }

    /// Appends complete records (each ending in '\n'). Never blocks on I/O and never throws:
    /// when host memory runs out the records are dropped (logged once; dropped() turns true) and
    /// counted; the next flush that can appends a `U` record with the count (docs/report-format.md).
    void append(std::string_view records) noexcept override;

    /// Packed records are formatted by the thread that writes the buffer out. Like append(),
    /// never blocks on I/O and never throws.
    void append_packed(PackedFormat format, const void* payload, uint32_t bytes) noexcept override;
    bool dropped() const {
        std::lock_guard<FutexLock> lock(mu_);
        return dropped_;
    }
    /// Counts `records` lost before they reached the writer (made before the report existed);
    /// they are reported in a `U` record like the writer's own drops.
    void add_lost(uint64_t records) noexcept override;

    /// Writes everything appended so far, with a heartbeat, from the calling thread.
    void flush() override;

    /// Appends the end record, writes everything and stops the writer thread.
    void finish() override;

    // fork(2) support: in the child the writer forgets the parent's file, buffer and thread.
    void lock_for_fork() override;
    void unlock_after_fork() override;
    void reset_in_child() override;

    static constexpr int64_t kFlushIntervalMs = 250;
    static constexpr size_t kWakeThreshold = 1 << 20;
    static constexpr size_t kMaxSpare = 16 << 20;  // a larger written buffer is freed, not kept

private:
    // A packed record in the buffer: this byte (never the first byte of a text record, which is
    // its type letter), the field count (one byte), the format function, then the fields.
    static constexpr char kPackedMarker = '\x01';
    static constexpr size_t kPackedHeader = 2 + sizeof(PackedFormat);

    static void* thread_main(void* self);
    void run();
    /// On the writer thread (or at finish()): starts the follower once the parts ask for it, and
    /// reaps the child it spawned.
    void tend_follower();
    /// Takes the buffer (adding a heartbeat when it holds records) under the lock, writes it
    /// outside the lock. io_mu_ keeps file writes in order.
    void write_pending(bool heartbeat = true);
    bool write_all(const char* data, size_t n) { return write_fully(fd_, data, n); }
    /// Appends `n` bytes that `fill(at)` writes, under mu_; when the memory cannot be had, counts
    /// `lines()` records as lost instead. Inline, with append_packed: a packed record of a size
    /// known where it is appended is copied without a call.
    template <typename Lines, typename Fill>
    void append_locked(size_t n, bool packed, Lines lines, Fill fill) noexcept;
    static void log_dropped() noexcept;
    /// With mu_ held: `records` were dropped. True the first time: the caller logs it once it
    /// has released mu_.
    bool note_dropped_locked(uint64_t records) noexcept;
    /// With mu_ held: appends the U record of the records dropped since the last one, if any.
    void append_lost_locked() noexcept;
    /// Writes `raw` with its packed records formatted, in order (a bounded report's detail to its
    /// part); false when a write failed.
    bool write_formatted(std::string_view raw);
    /// Writes to the report file (a bounded report's spine), counting what a limit counts.
    /// The limit makes room first (the `f` records of the parts it deletes follow the bytes); not
    /// for the end record, whose room the limit keeps (`last`).
    bool write_spine(const char* data, size_t n, bool last = false);
    /// The writer's own records (H, Z, U) in the report's encoding: the view is valid until the
    /// next call.
    template <class R>
    std::string_view own_record(const R& r) noexcept {
        if (binary_) return format::encode_plain(r, own_frame_);
        format::encode(r, own_line_);
        return own_line_.finish();
    }

    Clock& clock_;
    // Guards buffer_, dropped_, lost_, lost_since_, has_packed_. Every hook's record takes it.
    mutable FutexLock mu_;
    std::mutex wake_mu_;  // guards stop_; the writer thread waits on cv_ with it
    std::condition_variable cv_;
    ByteBuffer buffer_;
    bool stop_ = false;
    bool dropped_ = false;     // records were ever dropped
    uint64_t lost_ = 0;        // records dropped and not yet reported in a U record
    int64_t lost_since_ = 0;   // when the first of them was dropped
    bool has_packed_ = false;  // buffer_ holds packed records
    std::mutex io_mu_;         // serializes write(2) calls on fd_; guards spare_ and chunk_
    ByteBuffer spare_;         // the last written buffer, empty, for buffer_ to take over
    static constexpr size_t kChunk = 64 << 10;
    static constexpr size_t kSpineExtra = 2048;  // room for a bounded report's `l` and `f` records
    std::string chunk_;                        // formatted packed records on their way to the file
    std::string spine_room_;                   // the `f` records of parts deleted to make room for spine bytes
    std::string spine_run_;                    // a run of spine records without its repeated tags
    format::binary::Predictions predictions_;  // binary: the predicted records' state, in file order
    uint64_t limit_ = 0;                       // set_limit
    uint64_t part_size_ = 0;                   // set_part_size
    std::unique_ptr<ReportParts> parts_;       // a bounded report's detail parts (under io_mu_)
    bool follow_ = false;                      // set_follower
    std::string follower_cli_;
    pid_t follower_pid_ = 0;        // the follower's spawned child (writer thread, finish())
    bool follower_reaped_ = false;  // ... reaped
    // own_record's buffers, under mu_ (H and U).
    format::Line own_line_;
    format::Frame own_frame_;
    int fd_ = -1;
    bool io_failed_ = false;
    std::string path_;
    pthread_t thread_{};
    bool thread_running_ = false;
};

__attribute__((always_inline)) inline void ReportWriter::append_packed(PackedFormat format, const void* payload,
                                                                       uint32_t bytes) noexcept {
    if (bytes > kMaxPackedBytes) bytes = kMaxPackedBytes;
    append_locked(
        kPackedHeader + bytes, true, [] { return uint64_t{1}; },
        [&](char* at) {
            at[0] = kPackedMarker;
            at[1] = static_cast<char>(bytes);
            std::memcpy(at + 2, &format, sizeof format);
            std::memcpy(at + kPackedHeader, payload, bytes);
        });
}

template <typename Lines, typename Fill>
inline void ReportWriter::append_locked(size_t n, bool packed, Lines lines, Fill fill) noexcept {
    bool wake = false;
    bool first_drop = false;
    {
        std::lock_guard<FutexLock> lock(mu_);
        const size_t before = buffer_.size();
        if (char* at = buffer_.extend(n)) {
            fill(at);
            has_packed_ = has_packed_ || packed;
            wake = before < kWakeThreshold && buffer_.size() >= kWakeThreshold;
        } else {
            // Host memory is exhausted. The hooks calling this run inside the host's CUDA calls
            // and PyTorch's noexcept deleters, where an exception would end the program: the
            // records are dropped instead and counted (a U record), and the log says once (not
            // under this lock, which a freeing thread may wait for) that the report is incomplete.
            first_drop = note_dropped_locked(lines());
        }
    }
    if (first_drop) log_dropped();
    if (wake) cv_.notify_one();
}

}  // namespace memguard::track

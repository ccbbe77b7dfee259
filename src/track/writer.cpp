#include "track/writer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "format/encode.h"
#include "format/fold_room.h"
#include "track/clock.h"
#include "track/follower.h"
#include "track/packed.h"

namespace memguard::track {

namespace {

std::string shown(const std::string& path) { return "'" + echo_value(path) + "'"; }

const char* type_name(mode_t mode) {
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

}  // namespace

bool ReportWriter::start(const std::string& path, const std::string& name_in_directory, std::string_view header,
                         std::string* error) {
    // What has the name the user gave decides; the names memguard makes (the numbered ones, the
    // one inside a directory) only need to be free.
    std::string base = path;
    bool user_name = true;
    if (!base.empty() && base.back() == '/') {
        base += name_in_directory;
        user_name = false;
    }
    std::string candidate = base;
    int fd = -1, open_errno = 0;
    for (int attempt = 0; attempt < 100; ++attempt) {
        if (attempt > 0) candidate = base + "." + std::to_string(attempt);
        fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        open_errno = errno;
        if (fd >= 0 || open_errno != EEXIST) break;
        struct stat st;
        if (lstat(candidate.c_str(), &st) != 0 || S_ISREG(st.st_mode)) continue;
        // A symbolic link where the report should go is what an attack in a shared directory
        // looks like: refuse, and say so, rather than quietly writing next to it.
        if (S_ISLNK(st.st_mode)) {
            *error = "refusing to create report file " + shown(candidate) + ": a symbolic link is in the way";
            return false;
        }
        if (attempt > 0 || !user_name) continue;
        if (S_ISDIR(st.st_mode)) {
            user_name = false;
            base = candidate + "/" + name_in_directory;
            candidate = base;
            attempt = -1;  // the numbering starts again inside the directory
            continue;
        }
        // Nothing next to a device (MEMGUARD_OUTPUT=/dev/null made /dev/null.1, as root a regular
        // file among the device nodes), a FIFO or a socket: that name was meant for something else.
        *error = shown(candidate) + " is " + type_name(st.st_mode) +
                 ", not a regular file or a directory (MEMGUARD_ENABLE=0 turns memguard off)";
        return false;
    }
    if (fd < 0) {
        *error = "cannot create report file " + shown(candidate) + ": " + std::strerror(open_errno);
        return false;
    }
    // A file that exists is never empty: the header goes out now, not at the first flush.
    if (!write_fully(fd, header.data(), header.size())) {
        const int write_errno = errno;
        *error = "cannot write report file " + shown(candidate) + ": " + std::strerror(write_errno);
        ::close(fd);
        ::unlink(candidate.c_str());
        return false;
    }
    fd_ = fd;
    path_ = candidate;
    if (limit_ > 0) {
        parts_ = std::make_unique<ReportParts>(limit_, part_size_ > 0 ? part_size_ : ReportParts::part_size_for(limit_),
                                               binary_);
        const size_t first_line = header.find('\n');
        if (!parts_->open(path_, fd_, header.substr(0, first_line == std::string_view::npos ? 0 : first_line + 1),
                          header.size())) {
            const int part_errno = errno;
            MG_LOG_WARN("cannot create the report's detail part beside {} ({}); the report is written whole, "
                        "without MEMGUARD_MAX_REPORT_SIZE's limit",
                        shown(path_), std::strerror(part_errno));
            parts_.reset();
        }
    }

    // The writer thread must never receive the host's signals.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_running_ = pthread_create(&thread_, nullptr, &ReportWriter::thread_main, this) == 0;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (!thread_running_) MG_LOG_WARN("cannot start the writer thread; the report is written at exit only");
    return true;
}

namespace {

/// The length of the binary frame at `p` (its letter, length and payload), or 0 when `end` comes
/// first. The frames appended are the writer's own encoder's: whole.
size_t frame_size(const char* p, const char* end) noexcept {
    uint64_t length = 0;
    size_t i = 1;
    for (int shift = 0; p + i < end && shift < 64; shift += 7) {
        const auto b = static_cast<uint8_t>(p[i++]);
        length |= static_cast<uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            return length <= static_cast<uint64_t>(end - p) - i ? i + static_cast<size_t>(length) : 0;
        }
    }
    return 0;
}

}  // namespace

void ReportWriter::append(std::string_view records) noexcept {
    // A text record must end its line: a packed record is recognized only at a line's start.
    // Binary records are frames, whole: nothing is added.
    const bool newline = !binary_ && !records.empty() && records.back() != '\n';
    const auto lines = [&] {
        uint64_t n = 0;
        if (binary_) {
            const char* end = records.data() + records.size();
            for (const char* p = records.data(); p < end; ++n) {
                const size_t size = frame_size(p, end);
                p = size == 0 ? end : p + size;
            }
        } else {
            n = static_cast<uint64_t>(std::count(records.begin(), records.end(), '\n'));
        }
        return n == 0 ? uint64_t{1} : n;
    };
    append_locked(records.size() + (newline ? 1 : 0), false, lines, [&](char* at) {
        if (!records.empty()) std::memcpy(at, records.data(), records.size());
        if (newline) at[records.size()] = '\n';
    });
}

void ReportWriter::log_dropped() noexcept {
    MG_LOG_WARN("out of host memory: report records dropped; the report is incomplete and says how many");
}

bool ReportWriter::note_dropped_locked(uint64_t records) noexcept {
    const bool first = !dropped_;
    dropped_ = true;
    if (records > 0) {
        if (lost_ == 0) lost_since_ = clock_.now();
        lost_ += records;
    }
    return first;
}

void ReportWriter::add_lost(uint64_t records) noexcept {
    bool first = false;
    {
        std::lock_guard<FutexLock> lock(mu_);
        first = note_dropped_locked(records);
    }
    if (first) log_dropped();
}

void ReportWriter::append_lost_locked() noexcept {
    if (lost_ == 0) return;
    // Still out of memory: the count waits for the next flush.
    if (buffer_.append(own_record(format::rec::Lost{clock_.now(), lost_since_, lost_}))) lost_ = 0;
}

bool ReportWriter::write_formatted(std::string_view raw) {
    // Text runs go out as they are; packed records are formatted into chunk_, which is written
    // out before it could run out of room, so it keeps its capacity and formatting allocates
    // nothing (a record's text is at most format::Line::kCapacity).
    // Every stamp in `raw` was made before this anchor (stamp_clock.h).
    clock_.anchor();
    uint64_t lost = 0;
    bool can_format = true;
    try {
        if (chunk_.capacity() < kChunk) chunk_.reserve(kChunk);
    } catch (...) {
        can_format = false;  // out of host memory: the packed records of this buffer are lost
    }
    chunk_.clear();
    PackedOut out(clock_, chunk_, binary_ ? &predictions_ : nullptr, parts_.get(), &predictions_);
    auto drain = [this] {
        const bool ok = write_spine(chunk_.data(), chunk_.size());
        chunk_.clear();
        return ok;
    };
    const char* p = raw.data();
    const char* end = p + raw.size();
    bool ok = true;
    while (ok && p < end) {
        if (*p == kPackedMarker) {
            if (static_cast<size_t>(end - p) < kPackedHeader) break;
            const uint32_t bytes = static_cast<unsigned char>(p[1]);
            const size_t size = kPackedHeader + bytes;
            if (bytes > kMaxPackedBytes || static_cast<size_t>(end - p) < size) break;
            PackedFormat format;
            unsigned char payload[kMaxPackedBytes];
            std::memcpy(&format, p + 2, sizeof format);
            std::memcpy(payload, p + kPackedHeader, bytes);
            p += size;
            if (!can_format) {
                ++lost;
                continue;
            }
            // A bounded report's spine may also get an `l` and the `f`s of the parts a rotation deletes.
            const size_t room = format::Line::kCapacity + (parts_ ? kSpineExtra : 0);
            if (chunk_.size() + room > chunk_.capacity()) ok = drain();
            try {
                format(payload, bytes, out);
            } catch (...) {
                ++lost;
            }
            continue;
        }
        // A run of text records (binary frames), up to the next packed one (which starts a line,
        // or a frame).
        const char* q = p;
        while (q < end) {
            if (binary_) {
                const size_t size = frame_size(q, end);
                q = size == 0 ? end : q + size;
            } else {
                const void* nl = std::memchr(q, '\n', static_cast<size_t>(end - q));
                q = nl ? static_cast<const char*>(nl) + 1 : end;
            }
            if (q < end && *q == kPackedMarker) break;
        }
        std::string_view run(p, static_cast<size_t>(q - p));
        if (parts_) {
            parts_->before_spine(chunk_);
            if (parts_->leave_out_repeated_tags(run, spine_run_)) run = spine_run_;
        }
        ok = drain() && write_spine(run.data(), run.size());
        p = q;
    }
    if (ok && parts_) ok = parts_->drain(predictions_, chunk_, clock_.now());
    if (ok) ok = drain();
    if (parts_ && parts_->failed()) ok = false;
    chunk_.clear();
    if (lost > 0) {
        bool first = false;
        {
            std::lock_guard<FutexLock> lock(mu_);
            first = note_dropped_locked(lost);
        }
        if (first) log_dropped();
    }
    return ok;
}

void* ReportWriter::thread_main(void* self) {
    pthread_setname_np(pthread_self(), "memguard-writer");
    static_cast<ReportWriter*>(self)->run();
    return nullptr;
}

bool ReportWriter::write_spine(const char* data, size_t n, bool last) {
    if (!parts_) return write_all(data, n);
    spine_room_.clear();
    if (!last) parts_->room_for_spine(n, spine_room_, clock_.now());
    parts_->wrote_spine(n + spine_room_.size());
    return write_all(data, n) && (spine_room_.empty() || write_all(spine_room_.data(), spine_room_.size()));
}

void ReportWriter::run() {
    std::unique_lock<std::mutex> lock(wake_mu_);
    while (!stop_) {
        cv_.wait_for(lock, std::chrono::milliseconds(kFlushIntervalMs));
        if (stop_) break;
        lock.unlock();
        write_pending();
        tend_follower();
        lock.lock();
    }
}

void ReportWriter::tend_follower() {
    if (follower_pid_ > 0 && !follower_reaped_) {
        int status = 0;
        follower_reaped_ = reap_follower(follower_pid_, 0, status);
    }
    {
        std::lock_guard<std::mutex> io(io_mu_);
        if (!parts_ || !parts_->take_follower_request() || !follow_) return;
    }
    // The follower needs the memguard program (the reader folds, not the library); without it the
    // parts the limit has no room for are deleted unfolded, as the `f` records say.
    std::string why, error;
    const std::string cli = find_follower_cli(follower_cli_, why);
    if (cli.empty()) {
        MG_LOG_WARN("bounded report {}: no follower to fold its detail parts ({}); the parts the limit has no "
                    "room for are deleted unfolded (MEMGUARD_FOLD=0 says this is meant)",
                    shown(path_), echo_value(why));
        return;
    }
    // Its folds count in the limit through the room the writer grants them (format/fold_room.h).
    bool room = false;
    {
        std::lock_guard<std::mutex> io(io_mu_);
        room = parts_->open_room();
        if (!room) error = std::strerror(errno);
    }
    if (!room) {
        MG_LOG_WARN("bounded report {}: cannot create {} for its follower ({}); the parts the limit has no room "
                    "for are deleted unfolded",
                    shown(path_), shown(path_ + std::string(format::fold_room::kSuffix)), echo_value(error));
        return;
    }
    const pid_t pid = start_follower(cli, fd_, error);
    if (pid < 0) {
        MG_LOG_WARN("bounded report {}: cannot start its follower ({}); the parts the limit has no room for are "
                    "deleted unfolded",
                    shown(path_), echo_value(error));
        return;
    }
    follower_pid_ = pid;
    // --detach: the child forks the follower and exits at once; reaped here, so that the host's own
    // wait() never meets it (the follower itself is not the host's child).
    int status = 0;
    follower_reaped_ = reap_follower(pid, 2000, status);
    if (follower_reaped_ && status != 0) {  // 0: it exited with status 0
        MG_LOG_WARN("bounded report {}: its follower ({} compact --follow) failed to start (wait status {}); the "
                    "parts the limit has no room for are deleted unfolded",
                    shown(path_), echo_value(cli), status);
    } else {
        MG_LOG_INFO("bounded report {}: folding its detail parts as they close ({} compact --follow)", shown(path_),
                    echo_value(cli));
    }
}

void ReportWriter::write_pending(bool heartbeat) {
    std::lock_guard<std::mutex> io(io_mu_);
    // The buffer the hooks append to next is the one written last time, emptied: it keeps its
    // capacity, so appending does not grow (reallocate and copy) a fresh string after every flush.
    ByteBuffer out = std::move(spare_);
    out.clear();
    bool packed = false;
    {
        std::lock_guard<FutexLock> lock(mu_);
        if (buffer_.empty() && lost_ == 0) {
            spare_ = std::move(out);
            return;
        }
        if (heartbeat) {
            append_lost_locked();
            // Out of host memory, this flush goes without its heartbeat (append's comment).
            (void)buffer_.append(own_record(format::rec::Heartbeat{clock_.now()}));
        }
        out.swap(buffer_);
        packed = has_packed_;
        has_packed_ = false;
    }
    // A bounded report's buffer is split even without packed records: its spine tells positions.
    if (fd_ >= 0 && !io_failed_ &&
        !(packed || parts_ ? write_formatted(out.view()) : write_all(out.data(), out.size()))) {
        io_failed_ = true;
        const int write_errno = errno;
        MG_LOG_WARN("writing the report {} failed ({}); recording continues but is no longer saved", shown(path_),
                    std::strerror(write_errno));
    }
    if (out.capacity() <= kMaxSpare) {
        out.clear();
        spare_ = std::move(out);
    }
}

void ReportWriter::flush() { write_pending(); }

void ReportWriter::finish() {
    {
        std::lock_guard<std::mutex> lock(wake_mu_);
        stop_ = true;
    }
    cv_.notify_one();
    if (thread_running_) {
        pthread_join(thread_, nullptr);
        thread_running_ = false;
    }
    {
        std::lock_guard<FutexLock> lock(mu_);
        append_lost_locked();  // before the end record, which is the file's last line
    }
    // Not own_record: a flush from another thread may be using its buffers.
    std::string z;
    if (!parts_) {
        encode_record(binary_, format::rec::End{clock_.now()}, z);
        append(z);
        write_pending(false);  // the end record is the file's last line
    } else {
        // A bounded report's end record comes once its parts are written and closed: a follower that
        // reads it may fold through the newest part but one (its carried set whole).
        write_pending(false);
        std::lock_guard<std::mutex> io(io_mu_);
        parts_->close();
        parts_->before_spine(z);
        encode_record(binary_, format::rec::End{clock_.now()}, z);
        if (fd_ >= 0 && !io_failed_ && !write_spine(z.data(), z.size(), true)) {
            io_failed_ = true;
            MG_LOG_WARN("writing the report {} failed ({}); its end record is missing", shown(path_),
                        std::strerror(errno));
        }
    }
    tend_follower();
}

void ReportWriter::lock_for_fork() {
    io_mu_.lock();
    wake_mu_.lock();
    mu_.lock();
}

void ReportWriter::unlock_after_fork() {
    mu_.unlock();
    wake_mu_.unlock();
    io_mu_.unlock();
}

void ReportWriter::reset_in_child() {
    // The parent's writer thread may have been waiting on cv_; it does not exist in the child.
    new (&cv_) std::condition_variable();
    // The parent owns the file, the buffered records and the thread; the child keeps none.
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (parts_) parts_->forget();
    parts_.reset();
    // The parent's follower folds the parent's report; this process starts its own for its own.
    follower_pid_ = 0;
    follower_reaped_ = false;
    io_failed_ = false;
    path_.clear();
    buffer_.release();
    spare_.release();
    chunk_.clear();
    chunk_.shrink_to_fit();
    dropped_ = false;
    lost_ = 0;
    lost_since_ = 0;
    has_packed_ = false;
    stop_ = false;
    thread_running_ = false;
    predictions_.reset();  // the child's report predicts from its own records
}

}  // namespace memguard::track

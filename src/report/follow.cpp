#include "report/follow.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "common/text.h"
#include "format/binary.h"
#include "format/binary_decode.h"
#include "format/decode.h"
#include "format/fold_room.h"
#include "format/records.h"
#include "report/detail_parts.h"
#include "report/fold.h"
#include "report/parser.h"
#include "report/report.h"

namespace memguard::report {

namespace {

constexpr int kFailuresInARow = 3;  // a fold that fails this often while the writer runs ends the follow
constexpr long long kStartSlackNs = 2'000'000'000;  // /proc's start times are known to a second or so

/// The spine as the writer appends to it: each look reads what was added since, record by record
/// (a record cut short waits for the next look), for the header's pid and the end record.
class SpineWatch {
public:
    explicit SpineWatch(const std::string& path) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd_ < 0) throw ReportError(path + ": cannot open (" + std::strerror(errno) + ")");
    }
    ~SpineWatch() { ::close(fd_); }
    SpineWatch(const SpineWatch&) = delete;
    SpineWatch& operator=(const SpineWatch&) = delete;

    /// Reads what the writer added since the last look.
    void look() {
        char chunk[1 << 16];
        for (;;) {
            const ssize_t n = ::pread(fd_, chunk, sizeof chunk, static_cast<off_t>(offset_ + buf_.size()));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw ReportError(path_ + ": cannot read (" + std::strerror(errno) + ")");
            if (n == 0) break;
            buf_.append(chunk, static_cast<size_t>(n));
        }
        size_t pos = 0;
        if (!magic_) {
            const size_t nl = buf_.find('\n');
            if (nl == std::string::npos) {
                if (buf_.size() > 256) throw ReportError(path_ + ": not a memguard report (no header line)");
                return;
            }
            magic_ = buf_.substr(0, nl);
            const std::string binary_prefix = std::string(format::kBinaryMagic) + " ";
            if (magic_->rfind(binary_prefix, 0) == 0) {
                const std::optional<uint64_t> v = text::parse_dec(
                    std::string_view(*magic_).substr(binary_prefix.size()));
                if (!v || *v < 1 || *v > static_cast<uint64_t>(format::binary::kVersion)) {
                    throw ReportError(path_ + ": a binary report of an encoding this memguard does not read ('" +
                                      *magic_ + "')");
                }
                binary_ = true;
                binary_decoder_.set_version(static_cast<int>(*v));
            } else if (magic_->rfind("MEMGUARD-REPORT ", 0) != 0) {
                throw ReportError(path_ + ": not a memguard report (its first line is '" + text::printable(*magic_) +
                                  "')");
            }
            pos = nl + 1;
        }
        try {
            binary_ ? frames(pos) : lines(pos);
        } catch (const format::Malformed& m) {
            throw ReportError(path_ + ": a header record cannot be read (" + m.what() + ")");
        }
        buf_.erase(0, pos);
        offset_ += pos;
        if (magic_) ++looks_;
    }

    bool complete() const { return complete_; }
    long pid() const { return pid_; }
    long long t0() const { return t0_; }
    bool bounded() const { return bounded_; }
    uint64_t limit() const { return limit_; }
    /// The header (its I records) has been read: a record that is not one came, or a second look did.
    bool header_read() const { return header_read_ || looks_ >= 2; }

private:
    void lines(size_t& pos) {
        std::vector<std::string_view> f;
        for (size_t nl; (nl = buf_.find('\n', pos)) != std::string::npos; pos = nl + 1) {
            const std::string_view line(buf_.data() + pos, nl - pos);
            if (line.empty()) continue;
            if (line[0] == format::rec::Info::kLetter && !header_read_) {
                split_fields(line, f);
                format::rec::Info r;
                text_decoder_.read(f, 0, r);
                info(r);
            } else {
                record(line[0]);
            }
        }
    }
    void frames(size_t& pos) {
        while (pos < buf_.size()) {
            const char* start = buf_.data() + pos;
            const char* end = buf_.data() + buf_.size();
            uint64_t length = 0;
            const char* p = format::get_varint(start + 1, end, &length);
            if (p == nullptr) {
                if (end - start >= 11)
                    throw ReportError(path_ + ": a bad record length at byte " + std::to_string(offset_ + pos));
                return;
            }
            if (length > static_cast<uint64_t>(end - p)) return;  // cut short: the rest comes later
            const std::string_view payload(p, static_cast<size_t>(length));
            if (*start == format::rec::Info::kLetter && !header_read_) {
                format::rec::Info r;
                binary_decoder_.read(payload, 0, r);
                info(r);
            } else {
                record(*start);
            }
            pos = static_cast<size_t>(p - buf_.data()) + static_cast<size_t>(length);
        }
    }
    void info(const format::rec::Info& r) {
        const auto number = [&]() -> long long {
            const std::optional<uint64_t> v = text::parse_dec(r.value);
            return v && *v <= static_cast<uint64_t>(LLONG_MAX) ? static_cast<long long>(*v) : 0;
        };
        if (r.key == "pid") pid_ = static_cast<long>(std::min<long long>(number(), LONG_MAX));
        if (r.key == "t0_unix_ns") t0_ = number();
        if (r.key == "report_limit") {
            bounded_ = true;
            limit_ = static_cast<uint64_t>(number());
        }
    }
    void record(char letter) {
        header_read_ = true;
        if (letter == format::rec::End::kLetter) complete_ = true;
    }

    std::string path_;
    int fd_ = -1;
    uint64_t offset_ = 0;  // the file's offset of buf_'s first byte
    std::string buf_;
    std::optional<std::string> magic_;
    bool binary_ = false;
    format::Decoder text_decoder_;
    format::BinaryDecoder binary_decoder_;
    unsigned looks_ = 0;
    bool header_read_ = false, complete_ = false, bounded_ = false;
    long pid_ = 0;
    long long t0_ = 0;
    uint64_t limit_ = 0;
};

uint64_t size_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
}

/// When process `pid` started (ns since the epoch; /proc/stat's btime and the process's start
/// ticks), and whether it is a zombie; nothing when /proc does not say.
std::optional<long long> started_unix_ns(long pid, bool& zombie) {
    const auto read_all = [](const std::string& path) {
        std::string out;
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return out;
        char buf[4096];
        for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
        ::close(fd);
        return out;
    };
    const std::string stat = read_all("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return std::nullopt;
    std::vector<std::string_view> f;
    split_fields(std::string_view(stat).substr(paren + 1), f);  // state (field 3) first
    if (!f.empty()) zombie = f[0] == "Z" || f[0] == "X";
    if (f.size() < 20) return std::nullopt;
    const std::optional<uint64_t> ticks = text::parse_dec(f[19]);  // field 22: starttime
    const std::string boot = read_all("/proc/stat");
    const size_t at = boot.find("\nbtime ");
    if (!ticks || at == std::string::npos) return std::nullopt;
    const std::optional<uint64_t> btime = text::parse_dec(
        std::string_view(boot).substr(at + 7, boot.find('\n', at + 7) - (at + 7)));
    const long hz = ::sysconf(_SC_CLK_TCK);
    if (!btime || hz <= 0) return std::nullopt;
    return static_cast<long long>(*btime) * 1'000'000'000 +
           static_cast<long long>(*ticks) * (1'000'000'000 / static_cast<long long>(hz));
}

void sleep_ms(int ms) {
    timespec t{ms / 1000, static_cast<long>(ms % 1000) * 1000000};
    while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

}  // namespace

bool writer_alive(long pid, long long t0_unix_ns) {
    if (pid <= 0) return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
    bool zombie = false;
    const std::optional<long long> started = started_unix_ns(pid, zombie);
    if (zombie) return false;  // it has exited; its parent has not reaped it yet
    return !(started && t0_unix_ns > 0 && *started > t0_unix_ns + kStartSlackNs);
}

FoldRoom::FoldRoom(const std::string& spine) : spine_(spine), path_(format::fold_room::path(spine)) {}

FoldRoom::~FoldRoom() {
    if (fd_ >= 0) ::close(fd_);
}

bool FoldRoom::fits(uint64_t bytes, unsigned part, bool writer_done, uint64_t limit) {
    uint64_t folds = 0;
    for (unsigned n : find_folds(spine_)) folds += size_of(fold_path(spine_, n));
    const uint64_t need = folds + bytes;
    if (need <= granted()) return true;
    if (writer_done) {
        uint64_t all = size_of(spine_) + folds + size_of(path_);
        for (unsigned n : detail_part_numbers(spine_)) all += size_of(detail_part_path(spine_, n));
        return all + bytes <= limit;
    }
    // An eighth more: the next fold is a little larger, and need not wait for the writer again.
    const uint64_t want = need + need / 8;
    if (open() && want > wanted_.bytes) {
        wanted_ = {want, part};
        const std::string line = format::fold_room::line(format::fold_room::kWanted, wanted_);
        (void)!::pwrite(fd_, line.data(), line.size(), format::fold_room::kWantedAt);
    }
    return false;
}

void FoldRoom::remove() {
    if (fd_ >= 0 || open()) ::unlink(path_.c_str());
}

bool FoldRoom::open() {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    return fd_ >= 0;
}

uint64_t FoldRoom::granted() {
    if (!open()) return 0;  // the writer made no room (yet): no fold while it runs
    char buf[format::fold_room::kFileBytes];
    const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);
    if (n <= 0) return granted_;
    const std::optional<format::fold_room::Room> g = format::fold_room::parse(std::string_view(buf,
                                                                                               static_cast<size_t>(n)),
                                                                              format::fold_room::kGrantedAt,
                                                                              format::fold_room::kGranted);
    if (g) granted_ = std::max(granted_, g->bytes);  // a line half written: the last one read
    return granted_;
}

FollowResult follow_report(const std::string& spine, const FollowOptions& options) {
    FollowResult out;
    const std::vector<unsigned> folds = find_folds(spine);
    out.part = folds.empty() ? 0 : folds.front();
    SpineWatch watch(spine);
    FoldRoom room(spine);
    // A fold made that waits for room: written before any later one is made (the writer may delete
    // the parts it covers once it granted the room for it: they are in it already).
    std::optional<CompactResult> waiting;
    int failures = 0;
    for (;;) {
        watch.look();
        const bool complete = watch.complete();
        bool gone = false;
        if (!complete && watch.header_read()) {
            if (!watch.bounded()) {
                throw ReportError(spine + ": not a bounded report (no I report_limit in its header: it was not "
                                          "written under MEMGUARD_MAX_REPORT_SIZE)");
            }
            if (watch.pid() <= 0) throw ReportError(spine + ": its header names no writer (I pid)");
            gone = !writer_alive(watch.pid(), watch.t0());
        }
        const bool done = complete || gone;
        const MayWrite may_write = [&](uint64_t bytes, unsigned part) {
            return room.fits(bytes, part, done, watch.limit());
        };
        // Through part N once part N + 2 is there (follow.h says why), or once the report is complete
        // through the newest part but one; its next part must be there to stand where it begins.
        const std::vector<unsigned> parts = detail_part_numbers(spine);
        const unsigned newest = parts.empty() ? 0 : parts.back();
        const unsigned through = complete ? (newest > 0 ? newest - 1 : 0) : (newest > 2 ? newest - 2 : 0);
        try {
            if (waiting) {
                if (may_write(waiting->unwritten.size(), waiting->through)) {
                    write_fold(spine, waiting->through, waiting->unwritten);
                    ++out.folds;
                    out.part = waiting->through;
                    if (options.said) {
                        options.said(spine + ": folded through detail part " + std::to_string(out.part) + " (" +
                                     fold_path(spine, out.part) + ")");
                    }
                    waiting.reset();
                } else if (done && options.said) {
                    options.said(spine + ": no room under the report's limit for the fold through detail part " +
                                 std::to_string(waiting->through) + " (" + std::to_string(waiting->unwritten.size()) +
                                 " bytes): not written");
                }
            } else if (through > out.part && std::binary_search(parts.begin(), parts.end(), through + 1)) {
                CompactResult c = compact_report(spine, through, may_write);
                if (c.wrote) ++out.folds;
                out.part = std::max(out.part, c.part);
                failures = 0;
                if (!c.unwritten.empty()) {
                    waiting = std::move(c);  // said once written, or at the end
                } else if (options.said) {
                    options.said(c.message);
                }
            }
        } catch (const ReportError& e) {
            // The writer may have deleted a part the fold was reading: try again at the next look,
            // unless this was the last one or the fold keeps failing (a full disk).
            if (done || ++failures >= kFailuresInARow) {
                room.remove();
                throw;
            }
        }
        if (done) {
            // The follow ends with the last fold made and written (or not, for want of room); one
            // that waited and is written now may leave a later one to make.
            const bool more = !waiting && through > out.part &&
                              std::binary_search(parts.begin(), parts.end(), through + 1);
            if (!more) {
                room.remove();
                out.complete = complete;
                return out;
            }
            continue;
        }
        sleep_ms(options.poll_ms);
    }
}

}  // namespace memguard::report

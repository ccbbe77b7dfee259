#include "report_input.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "cli.h"

namespace memguard::cli {

namespace {

/// The directory of the spool: $TMPDIR when it is an absolute path, else /tmp (as `memguard run`).
std::string spool_directory() {
    const char* tmp = std::getenv("TMPDIR");
    return tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
}

/// An unnamed file in `dir`, open for reading and writing, or -1 with errno set. O_TMPFILE makes an
/// inode with no name (O_EXCL: it can never be given one); where the file system has no O_TMPFILE,
/// mkostemp creates a fresh name exclusively (a planted link or file at it is never opened) and the
/// name is removed at once.
int create_spool(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
    std::string name = dir + "/memguard-spool.XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0) return -1;
    if (::unlink(name.c_str()) != 0) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/// Writes all of [data, data + size) at `offset`; the bytes written.
size_t write_all(int fd, const char* data, size_t size, uint64_t offset) {
    size_t done = 0;
    while (done < size) {
        ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ENOSPC;
            break;
        }
        done += static_cast<size_t>(n);
    }
    return done;
}

}  // namespace

/// One pass's place in the report.
struct ReportInput::Cursor {
    ReportInput* in;
    uint64_t pos = 0;
};

ReportInput::ReportInput(std::string path) : path_(std::move(path)), file_(report::rereadable(path_)) {}

ReportInput::~ReportInput() {
    if (pipe_ != nullptr) std::fclose(pipe_);
    if (spool_ >= 0) ::close(spool_);
}

void ReportInput::spool_failed(const std::string& why) {
    if (warned_) return;
    warned_ = true;
    print_warnings({path_ + ": cannot copy it to a temporary file in " + spool_directory() + " (" + why +
                    "): it is read whole, in memory"});
}

ssize_t ReportInput::read_at(uint64_t& pos, char* buf, size_t size) {
    if (pos < spooled_) {
        ssize_t n;
        do {
            n = ::pread(spool_, buf, std::min<uint64_t>(size, spooled_ - pos), static_cast<off_t>(pos));
        } while (n < 0 && errno == EINTR);
        if (n > 0) pos += static_cast<uint64_t>(n);
        if (n == 0) {  // the spool is shorter than what was written to it
            errno = EIO;
            return -1;
        }
        return n;
    }
    if (pos - spooled_ < held_.size()) {
        const size_t n = std::min<size_t>(size, held_.size() - (pos - spooled_));
        std::memcpy(buf, held_.data() + (pos - spooled_), n);
        pos += n;
        return static_cast<ssize_t>(n);
    }
    if (pos != pipe_pos_) {
        errno = ESPIPE;  // a byte of the pipe that nothing holds now (never: passes follow one another)
        return -1;
    }
    if (pipe_end_) return 0;
    ssize_t n;
    do {
        n = ::read(fileno(pipe_), buf, size);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        if (n == 0) pipe_end_ = true;
        return n;
    }
    const size_t got = static_cast<size_t>(n);
    pipe_pos_ += got;
    if (!copying_) {  // no spool (load() after it failed): read once
        pos += got;
        return n;
    }
    const size_t written = write_all(spool_, buf, got, spooled_);
    spooled_ += written;
    if (written < got) {
        const int err = errno;
        copying_ = false;
        failed_ = true;
        held_.assign(buf + written, got - written);
        spool_failed(std::string(std::strerror(err)) + " after " + std::to_string(spooled_) + " bytes");
        errno = err;
        return -1;  // ends this pass: stream() hands the report to load()
    }
    pos += got;
    return n;
}

std::FILE* ReportInput::open_cursor() {
    cookie_io_functions_t io{};
    io.read = [](void* c, char* buf, size_t size) -> ssize_t {
        auto* cursor = static_cast<Cursor*>(c);
        return cursor->in->read_at(cursor->pos, buf, size);
    };
    io.close = [](void* c) -> int {
        delete static_cast<Cursor*>(c);
        return 0;
    };
    auto* cursor = new Cursor{this};
    std::FILE* f = fopencookie(cursor, "r", io);
    if (f == nullptr) {
        delete cursor;
        throw report::ReportError(path_ + ": cannot read: " + std::strerror(errno));
    }
    return f;
}

namespace {

struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, Closer>;

}  // namespace

std::optional<report::Report> ReportInput::stream(report::EventObserver& observer) {
    if (file_) return report::stream_report(path_, observer);
    if (pipe_ == nullptr) {
        pipe_ = report::open_report(path_);
        if (pipe_ == nullptr) throw report::ReportError(path_ + ": cannot open: " + std::strerror(errno));
        spool_ = create_spool(spool_directory());
        if (spool_ < 0) {
            spool_failed(std::strerror(errno));
            return std::nullopt;
        }
        copying_ = true;
    }
    if (!copying_) return std::nullopt;
    File f(open_cursor());
    try {
        return report::stream_report(f.get(), path_, observer);
    } catch (const report::ReportError&) {
        if (failed_) return std::nullopt;  // the spool could not be written: spool_failed said so
        throw;
    }
}

report::Report ReportInput::again(report::EventObserver& observer) {
    if (file_) return report::stream_report(path_, observer);
    File f(open_cursor());
    return report::stream_report(f.get(), path_, observer);
}

report::Report ReportInput::load() {
    if (file_ || pipe_ == nullptr) return report::load_report(path_);
    File f(open_cursor());
    return report::load_report(f.get(), path_);
}

}  // namespace memguard::cli

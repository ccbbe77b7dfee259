#include "output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>

#include "common/text.h"
#include "report/report.h"

namespace memguard::cli {

namespace {

/// Appends one conversion, formatted alone: `spec` is its part of the format ("%-10s"), `stars` the
/// values its '*' width or precision took.
template <class T>
void append_conversion(std::string& out, const std::string& spec, const int* stars, size_t n_stars, T v) {
    auto render = [&](char* buf, size_t size) {
        switch (n_stars) {
        case 0: return std::snprintf(buf, size, spec.c_str(), v);
        case 1: return std::snprintf(buf, size, spec.c_str(), stars[0], v);
        default: return std::snprintf(buf, size, spec.c_str(), stars[0], stars[1], v);
        }
    };
    char small[128];
    int n = render(small, sizeof small);
    if (n < 0) throw std::logic_error("print: bad conversion '" + spec + "'");
    if (static_cast<size_t>(n) < sizeof small) {
        out.append(small, static_cast<size_t>(n));
        return;
    }
    std::string big(static_cast<size_t>(n) + 1, '\0');
    render(big.data(), big.size());
    out.append(big.data(), static_cast<size_t>(n));
}

/// vsnprintf with every string argument made printable. The compiler checks the format against
/// the arguments (print's format attribute); what this reads is what the C standard defines, and
/// anything else is a bug of ours (std::logic_error).
std::string format_printable(const char* format, va_list ap) {
    std::string out;
    const char* p = format;
    while (*p != '\0') {
        if (*p != '%') {
            out.push_back(*p++);
            continue;
        }
        const char* start = p++;
        if (*p == '%') {
            out.push_back('%');
            ++p;
            continue;
        }
        int stars[2] = {0, 0};
        size_t n_stars = 0;
        while (*p != '\0' && std::strchr("-+ #0'", *p) != nullptr) ++p;
        if (*p == '*') {
            stars[n_stars++] = va_arg(ap, int);
            ++p;
        }
        while (std::isdigit(static_cast<unsigned char>(*p))) ++p;
        if (*p == '.') {
            ++p;
            if (*p == '*') {
                stars[n_stars++] = va_arg(ap, int);
                ++p;
            }
            while (std::isdigit(static_cast<unsigned char>(*p))) ++p;
        }
        std::string length;
        while (*p != '\0' && std::strchr("hljztL", *p) != nullptr) length.push_back(*p++);
        const char conv = *p;
        if (conv == '\0') throw std::logic_error(std::string("print: format ends inside a conversion: ") + format);
        ++p;
        const std::string spec(start, p);
        switch (conv) {
        case 'd':
        case 'i':
            if (length == "l") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, long));
            } else if (length == "ll") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, long long));
            } else if (length == "j") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, intmax_t));
            } else if (length == "z" || length == "t") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, ptrdiff_t));
            } else if (length.empty() || length == "h" || length == "hh") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, int));
            } else {
                throw std::logic_error("print: bad conversion '" + spec + "'");
            }
            break;
        case 'u':
        case 'o':
        case 'x':
        case 'X':
            if (length == "l") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, unsigned long));
            } else if (length == "ll") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, unsigned long long));
            } else if (length == "j") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, uintmax_t));
            } else if (length == "z" || length == "t") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, size_t));
            } else if (length.empty() || length == "h" || length == "hh") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, unsigned));
            } else {
                throw std::logic_error("print: bad conversion '" + spec + "'");
            }
            break;
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G':
        case 'a':
        case 'A':
            if (length == "L") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, long double));
            } else if (length.empty() || length == "l") {
                append_conversion(out, spec, stars, n_stars, va_arg(ap, double));
            } else {
                throw std::logic_error("print: bad conversion '" + spec + "'");
            }
            break;
        case 'c':
            if (!length.empty()) throw std::logic_error("print: bad conversion '" + spec + "'");
            append_conversion(out, spec, stars, n_stars, va_arg(ap, int));
            break;
        case 's': {
            if (!length.empty()) throw std::logic_error("print: bad conversion '" + spec + "'");
            const char* s = va_arg(ap, const char*);
            append_conversion(out, spec, stars, n_stars, text::printable(s != nullptr ? s : "(null)").c_str());
            break;
        }
        case 'p': append_conversion(out, spec, stars, n_stars, va_arg(ap, void*)); break;
        default: throw std::logic_error("print: unsupported conversion '" + spec + "'");
        }
    }
    return out;
}

void vprint_to(std::FILE* to, const char* format, va_list ap) {
    std::string text = format_printable(format, ap);
    std::fwrite(text.data(), 1, text.size(), to);  // a failure sets the stream's error, which main checks
}

[[noreturn]] void fail(const std::string& path, int err) {
    throw report::ReportError(output_name(path) + ": cannot write: " + std::strerror(err));
}

/// Writes all of `content` to `fd`; false with errno set when a write fails.
bool write_all(int fd, std::string_view content) {
    size_t done = 0;
    while (done < content.size()) {
        ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) {
            errno = EIO;
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return true;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

/// The standard stream (1 or 2) that is open on the file `st` describes, or -1.
int standard_stream_of(const struct stat& st) {
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
        struct stat s;
        if (::fstat(fd, &s) == 0 && same_file(s, st)) return fd;
    }
    return -1;
}

/// Writes to an open standard stream, after what stdio holds for it.
void write_standard_stream(const std::string& path, int fd, const Producer& produce) {
    std::fflush(fd == STDOUT_FILENO ? stdout : stderr);
    produce([&](std::string_view piece) {
        if (!write_all(fd, piece)) fail(path, errno);
    });
}

/// Calls `produce` with a writer to `fd` that throws on the first failed write; then closes `fd`
/// (whatever happens) and throws for a failed close.
void produce_to(const std::string& path, int fd, const Producer& produce) {
    try {
        produce([&](std::string_view piece) {
            if (!write_all(fd, piece)) fail(path, errno);
        });
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0) fail(path, errno);
}

const char* kind_of(mode_t mode) {
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
    throw report::ReportError(output_name(path) + ": cannot write: it is " + what +
                              " (give a file name, a character device, a FIFO or '-' for standard output)");
}

/// A device or FIFO of this user or of root. Another user's FIFO (or tty) at the name would
/// receive what the report holds: whoever can write to a shared directory could place one there.
void check_owner(const std::string& path, const struct stat& st) {
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
        refuse(path, std::string(kind_of(st.st_mode)) + " of another user (uid " + std::to_string(st.st_uid) + ")");
    }
}

/// Writes a character device or FIFO in place. Opened without O_CREAT or O_TRUNC, and checked
/// again once open: should `path` have been swapped for something else since it was looked at
/// (a link to a regular file), that is left as it was.
void write_in_place(const std::string& path, const Producer& produce) {
    int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail(path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        ::close(fd);
        throw report::ReportError(path + ": cannot write: it was replaced while memguard opened it");
    }
    try {
        check_owner(path, st);
    } catch (...) {
        ::close(fd);
        throw;
    }
    produce_to(path, fd, produce);
}

/// Creates a temporary file next to `path` with a random name, exclusively: a file or symbolic
/// link that anyone placed at any name is never opened. Returns its descriptor; fills `tmp`.
int create_temporary(const std::string& path, std::string& tmp) {
    static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::random_device random;
    std::uniform_int_distribution<size_t> pick(0, sizeof alphabet - 2);
    for (int attempt = 0; attempt < 100; ++attempt) {
        tmp = path + ".tmp.";
        for (int i = 0; i < 12; ++i) tmp.push_back(alphabet[pick(random)]);
        // 0640 as the reports (less the umask): what a run recorded is not for every user of the machine.
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd >= 0) return fd;
        if (errno != EEXIST) fail(path, errno);
    }
    fail(path, EEXIST);
}

void write_replacing(const std::string& path, const Producer& produce) {
    std::string tmp;
    int fd = create_temporary(path, tmp);
    try {
        produce_to(path, fd, produce);
    } catch (...) {
        ::unlink(tmp.c_str());  // a failed write, or the output's maker failed: `path` stays as it was
        throw;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail(path, err);
    }
}

bool write_output_to(const std::string& path, const Producer& content) {
    if (path == "-") {
        write_standard_stream(path, STDOUT_FILENO, content);
        return true;
    }
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno != ENOENT) fail(path, errno);
        write_replacing(path, content);
        return false;
    }
    // A symbolic link is looked through only to find a standard stream (/dev/stdout is one) and
    // to see whether a regular file is there; it is never opened. A link to a device or FIFO is
    // refused: one placed in a shared directory could send the output to anything (/dev/port, a
    // FIFO another user reads). A dangling one too (/dev/stdout with standard output closed).
    const bool link = S_ISLNK(st.st_mode);
    if (link && ::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) refuse(path, "a symbolic link to nothing");
        fail(path, errno);
    }
    int fd = standard_stream_of(st);
    if (fd >= 0) {
        write_standard_stream(path, fd, content);
        return fd == STDOUT_FILENO;
    }
    if (S_ISREG(st.st_mode)) {
        write_replacing(path, content);  // a link to a regular file: the link is replaced
        return false;
    }
    if (link) refuse(path, std::string("a symbolic link to ") + kind_of(st.st_mode));
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) refuse(path, kind_of(st.st_mode));
    check_owner(path, st);  // before the open: opening a FIFO waits for its reader
    write_in_place(path, content);
    return false;
}

}  // namespace

void print(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    try {
        vprint_to(stdout, format, ap);
    } catch (...) {
        va_end(ap);
        throw;
    }
    va_end(ap);
}

void print_to(std::FILE* to, const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    try {
        vprint_to(to, format, ap);
    } catch (...) {
        va_end(ap);
        throw;
    }
    va_end(ap);
}

std::string output_name(const std::string& path) { return path == "-" ? "standard output" : path; }

bool write_output_file(const std::string& path, const std::string& content) {
    uint64_t bytes = 0;
    return write_output_stream(
        path, [&](const ChunkWriter& write) { write(content); }, &bytes);
}

bool write_output_stream(const std::string& path, const Producer& produce, uint64_t* bytes) {
    *bytes = 0;
    const Producer counted = [&](const ChunkWriter& write) {
        produce([&](std::string_view piece) {
            write(piece);
            *bytes += piece.size();
        });
    };
    return write_output_to(path, counted);
}

}  // namespace memguard::cli

// Writing a report's files: the writer thread's one write loop, for the spine and its parts.
#pragma once

#include <cerrno>
#include <cstddef>
#include <unistd.h>

namespace memguard::track {

/// Writes all `n` bytes (retrying on EINTR and short writes); false with errno set on an error.
inline bool write_fully(int fd, const char* data, size_t n) noexcept {
    while (n > 0) {
        const ssize_t w = ::write(fd, data, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

}  // namespace memguard::track

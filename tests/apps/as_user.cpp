// Runs a program as another user: `as_user UID GID PROGRAM ARGS...` drops the supplementary groups,
// then the group and the user, and execs PROGRAM with the same environment (preload test
// SecureExecution runs a setuid-root copy of secure_alloc as nobody this way). Exit status 3 when
// the privileges cannot be dropped, 4 when PROGRAM cannot be executed (reason on stderr).
#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: as_user UID GID PROGRAM [ARGS...]\n");
        return 2;
    }
    const auto uid = static_cast<uid_t>(std::strtoul(argv[1], nullptr, 10));
    const auto gid = static_cast<gid_t>(std::strtoul(argv[2], nullptr, 10));
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
        std::fprintf(stderr, "as_user: cannot become %u:%u: %s\n", static_cast<unsigned>(uid),
                     static_cast<unsigned>(gid), std::strerror(errno));
        return 3;
    }
    execv(argv[3], argv + 3);
    std::fprintf(stderr, "as_user: cannot execute %s: %s\n", argv[3], std::strerror(errno));
    return 4;
}

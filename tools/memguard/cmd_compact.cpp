// memguard compact FILE [--through N | --follow [--detach]]: folds a bounded report's older detail
// parts into figures (report/fold.h, docs/bounded-reports.md); --follow goes on as the run writes
// it (report/follow.h), --detach in the background (the library starts it so at a bounded report's
// first rotation: track/follower.h).
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <iostream>
#include <optional>
#include <vector>

#include "cli.h"
#include "common/text.h"
#include "output.h"
#include "report/fold.h"
#include "report/follow.h"

namespace memguard::cli {

namespace {

/// `path` made absolute against the current directory (a detached follower leaves it).
std::string absolute(const std::string& path) {
    if (!path.empty() && path[0] == '/') return path;
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
        throw CommandError(std::string("cannot find the current directory: ") + std::strerror(errno));
    }
    return std::string(cwd) + "/" + path;
}

/// Closes the descriptors above stderr that the host left open across exec (without O_CLOEXEC): a
/// follower that outlives the host must not hold its pipes and sockets open.
void close_inherited_descriptors() {
    std::vector<int> open;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        const int own = ::dirfd(d);
        while (const dirent* e = ::readdir(d)) {
            const std::optional<uint64_t> fd = text::parse_dec(e->d_name);
            if (fd && *fd > 2 && *fd <= INT_MAX && static_cast<int>(*fd) != own) open.push_back(static_cast<int>(*fd));
        }
        ::closedir(d);
    }
    for (int fd : open) ::close(fd);
}

/// --detach: the process that started this one (libmemguard.so's writer thread) waits for it, and
/// only for it: it forks the follower and exits at once; the follower goes on in a session of its
/// own, the child of no process of the run (so that no wait() of the host meets it).
void detach() {
    close_inherited_descriptors();
    const pid_t pid = ::fork();
    if (pid < 0) throw CommandError(std::string("cannot start the follower (fork): ") + std::strerror(errno));
    if (pid > 0) {
        std::fflush(stdout);
        ::_exit(kExitOk);
    }
    ::setsid();
    // The report's path is absolute: the directory the run started in is not kept busy.
    if (::chdir("/") != 0) return;
}

}  // namespace

int run_compact(const Args& args) {
    if (!args.follow) {
        const report::CompactResult r = report::compact_report(args.file, args.through);
        print("%s\n", r.message.c_str());
        return kExitOk;
    }
    const std::string spine = absolute(args.file);
    if (args.detach) detach();
    report::FollowOptions options;
    options.said = [](const std::string& m) {
        print("%s\n", m.c_str());
        std::fflush(stdout);
    };
    try {
        const report::FollowResult r = report::follow_report(spine, options);
        print("%s: %s; %u fold(s) written, the newest through detail part %u\n", spine.c_str(),
              r.complete ? "the report is complete" : "its writer is gone", r.folds, r.part);
    } catch (const report::ReportError& e) {
        // A follower runs unseen: its one line says whose follower failed.
        std::cerr << "memguard: error: compact --follow: " << text::printable(e.what()) << "\n";
        return kExitUsage;
    }
    return kExitOk;
}

}  // namespace memguard::cli

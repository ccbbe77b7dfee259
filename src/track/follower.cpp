#include "track/follower.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memguard::track {

namespace {

bool executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_follower_cli(const std::string& configured, std::string& why) {
    if (!configured.empty()) {
        if (executable_file(configured)) return configured;
        why = "MEMGUARD_CLI=" + configured + " is not an executable file";
        return "";
    }
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&find_follower_cli), &info) == 0 || info.dli_fname == nullptr) {
        why = "the library's own path is not known (dladdr); set MEMGUARD_CLI";
        return "";
    }
    char real[PATH_MAX];
    if (::realpath(info.dli_fname, real) == nullptr) {
        why = std::string("the library's path ") + info.dli_fname + " cannot be resolved (" + std::strerror(errno) +
              "); set MEMGUARD_CLI";
        return "";
    }
    std::string dir = real;
    dir.resize(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    const std::string cli = dir + "/../bin/memguard";
    if (executable_file(cli)) return cli;
    why = "no memguard program at " + cli + " (beside the library); set MEMGUARD_CLI";
    return "";
}

pid_t start_follower(const std::string& cli, int spine_fd, std::string& error) {
    char link[64], spine[PATH_MAX];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", spine_fd);
    const ssize_t n = ::readlink(link, spine, sizeof spine - 1);
    if (n <= 0 || spine[0] != '/') {
        error = std::string("the report's path is not known (") + link + ": " + std::strerror(errno) + ")";
        return -1;
    }
    spine[n] = '\0';

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    if (posix_spawn_file_actions_init(&actions) != 0) {
        error = "posix_spawn_file_actions_init failed";
        return -1;
    }
    if (posix_spawnattr_init(&attr) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        error = "posix_spawnattr_init failed";
        return -1;
    }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    // The writer thread blocks every signal, and the host may catch or ignore some: the follower
    // starts with none blocked and each at its default.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::string program = cli;
    char compact[] = "compact", follow[] = "--follow", detach[] = "--detach", end[] = "--";
    char* argv[] = {program.data(), compact, follow, detach, end, spine, nullptr};
    char* envp[] = {nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        error = "cannot run " + cli + ": " + std::strerror(rc);
        return -1;
    }
    return pid;
}

bool reap_follower(pid_t pid, int wait_ms, int& status) {
    for (int waited = 0;; ++waited) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) return true;
        if (r < 0 && errno == EINTR) continue;
        // Not this process's child any more: reaped by the host (a wait(-1)) or ignored SIGCHLD.
        if (r < 0) return true;
        if (waited >= wait_ms) return false;
        const timespec ms{0, 1000000};
        ::nanosleep(&ms, nullptr);
    }
}

}  // namespace memguard::track

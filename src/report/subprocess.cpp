#include "report/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

extern char** environ;

namespace memguard::report {

namespace {

/// File descriptors of the child's stdin (a socket, so that writing to an exited child gives EPIPE
/// through MSG_NOSIGNAL instead of a SIGPIPE) and stdout (a pipe).
struct Channels {
    int in_parent = -1, in_child = -1, out_parent = -1, out_child = -1;

    bool open() {
        int sv[2], pv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
        if (pipe2(pv, O_CLOEXEC) != 0) {
            ::close(sv[0]);
            ::close(sv[1]);
            return false;
        }
        in_parent = sv[0];
        in_child = sv[1];
        out_parent = pv[0];
        out_child = pv[1];
        return true;
    }
    static void close_fd(int& fd) {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
    void close_child_ends() {
        close_fd(in_child);
        close_fd(out_child);
    }
    ~Channels() {
        close_fd(in_parent);
        close_fd(in_child);
        close_fd(out_parent);
        close_fd(out_child);
    }
};

bool spawn(const std::vector<std::string>& argv, Channels& ch, pid_t& pid) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ch.in_child, 0);
    posix_spawn_file_actions_adddup2(&actions, ch.out_child, 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0;
}

/// Feeds `input` and collects the output until the child closes its stdout.
void exchange(Channels& ch, const std::string& input, std::string& output) {
    size_t sent = 0;
    if (input.empty()) Channels::close_fd(ch.in_parent);
    char buf[65536];
    while (ch.out_parent >= 0) {
        pollfd fds[2] = {{ch.out_parent, POLLIN, 0}, {ch.in_parent, POLLOUT, 0}};
        int n = poll(fds, ch.in_parent >= 0 ? 2 : 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (ch.in_parent >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
            ssize_t w = send(ch.in_parent, input.data() + sent, input.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) sent += static_cast<size_t>(w);
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == input.size()) Channels::close_fd(ch.in_parent);
        }
        if ((fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
            ssize_t r = read(ch.out_parent, buf, sizeof buf);
            if (r > 0) output.append(buf, static_cast<size_t>(r));
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) Channels::close_fd(ch.out_parent);
        }
    }
}

}  // namespace

std::string find_program(const std::string& name) {
    if (name.empty()) return "";
    if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
    const char* path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t colon = dirs.find(':', start);
        if (colon == std::string::npos) colon = dirs.size();
        std::string dir = dirs.substr(start, colon - start);
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        start = colon + 1;
    }
    return "";
}

bool run_program(const std::vector<std::string>& argv, const std::string& input, std::string& output, int inherit_fd) {
    output.clear();
    if (argv.empty()) return false;
    Channels ch;
    if (!ch.open()) return false;
    pid_t pid = -1;
    // The CLI is single-threaded: the descriptor is inheritable only for this spawn.
    int fd_flags = inherit_fd >= 3 ? fcntl(inherit_fd, F_GETFD) : -1;
    if (fd_flags >= 0) fcntl(inherit_fd, F_SETFD, fd_flags & ~FD_CLOEXEC);
    bool spawned = spawn(argv, ch, pid);
    if (fd_flags >= 0) fcntl(inherit_fd, F_SETFD, fd_flags);
    if (!spawned) return false;
    ch.close_child_ends();
    exchange(ch, input, output);
    Channels::close_fd(ch.in_parent);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace memguard::report

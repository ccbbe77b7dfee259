#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace preload_test {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

void close_fd(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

}  // namespace

Child::Child(const ChildOptions& options) {
    if (options.argv.empty()) throw std::runtime_error("Child: empty argv");
    // Everything the child needs is prepared before fork(): afterwards only async-signal-safe
    // calls are allowed.
    std::vector<std::string> env_strings;
    for (const auto& [key, value] : options.env) env_strings.push_back(key + "=" + value);
    std::vector<char*> argv, envp;
    for (const std::string& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (const std::string& entry : env_strings) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();

    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        throw std::runtime_error("pipe2 failed");
    }
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid_ == 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        if (cwd != nullptr && chdir(cwd) != 0) _exit(126);
        if (options.umask) ::umask(*options.umask);
        execve(argv[0], argv.data(), envp.data());
        static const char message[] = "child_process: execve failed\n";
        ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
        (void)ignored;
        _exit(127);
    }
    close(null_fd);
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_fd_ = out_pipe[0];
    err_fd_ = err_pipe[0];
}

Child::~Child() {
    if (!reaped_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    close_fd(&out_fd_);
    close_fd(&err_fd_);
}

bool Child::pump(int timeout_ms) {
    pollfd fds[2];
    int count = 0;
    if (out_fd_ >= 0) fds[count++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[count++] = {err_fd_, POLLIN, 0};
    if (count == 0) return false;
    int ready = poll(fds, static_cast<nfds_t>(count), timeout_ms);
    if (ready < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    for (int i = 0; i < count && ready > 0; ++i) {
        if (fds[i].revents == 0) continue;
        char buffer[65536];
        ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
        if (n > 0) {
            (fds[i].fd == out_fd_ ? out_ : err_).append(buffer, static_cast<size_t>(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            close_fd(fds[i].fd == out_fd_ ? &out_fd_ : &err_fd_);
        }
    }
    return out_fd_ >= 0 || err_fd_ >= 0;
}

bool Child::wait_for_stdout(const std::string& marker, int timeout_ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out_.find(marker) == std::string::npos) {
        int left = remaining_ms(deadline);
        if (left == 0 || !pump(left)) return out_.find(marker) != std::string::npos;
    }
    return true;
}

void Child::kill(int signal) {
    if (!reaped_) ::kill(pid_, signal);
}

ChildResult Child::finish(int timeout_ms) {
    ChildResult result;
    result.pid = pid_;
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out_fd_ >= 0 || err_fd_ >= 0) {
        int left = remaining_ms(deadline);
        if (left == 0) {
            result.timed_out = true;
            ::kill(pid_, SIGKILL);
            // Read what is still buffered, but do not wait for descendants holding the pipes.
            auto drain_deadline = Clock::now() + std::chrono::seconds(2);
            while (remaining_ms(drain_deadline) > 0 && pump(100)) {
            }
            break;
        }
        pump(left);
    }
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
    result.out = out_;
    result.err = err_;
    return result;
}

ChildResult run_child(const ChildOptions& options, int timeout_ms) {
    Child child(options);
    return child.finish(timeout_ms);
}

}  // namespace preload_test

// Runs a program as a child process with an exact environment (nothing inherited), a working
// directory and an optional umask, capturing stdout and stderr.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace preload_test {

struct ChildOptions {
    std::vector<std::string> argv;           // argv[0] is the program's path
    std::map<std::string, std::string> env;  // the whole environment
    std::string cwd;                         // empty: the test's own
    std::optional<mode_t> umask;
};

struct ChildResult {
    pid_t pid = -1;
    int exit_code = -1;   // when the child exited
    int term_signal = 0;  // when a signal ended it
    bool timed_out = false;
    std::string out, err;
    bool exited() const { return term_signal == 0 && exit_code >= 0; }
};

class Child {
public:
    /// Starts the child; throws std::runtime_error when it cannot.
    explicit Child(const ChildOptions& options);
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }

    /// Reads output until stdout contains `marker`; false when the child ends or `timeout_ms`
    /// passes first.
    bool wait_for_stdout(const std::string& marker, int timeout_ms);
    void kill(int signal);
    /// Reads all output and waits for the child to end; kills it with SIGKILL after `timeout_ms`.
    ChildResult finish(int timeout_ms = 60'000);

private:
    // Reads whatever is available within `timeout_ms`; false when both pipes are closed.
    bool pump(int timeout_ms);

    pid_t pid_ = -1;
    int out_fd_ = -1, err_fd_ = -1;
    std::string out_, err_;
    bool reaped_ = false;
};

/// Starts the child, lets it run to the end and returns what it did.
ChildResult run_child(const ChildOptions& options, int timeout_ms = 60'000);

}  // namespace preload_test

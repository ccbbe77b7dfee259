// memguard run [OPTIONS] [--] CMD ARGS...: runs CMD with libmemguard.so preloaded and the options'
// MEMGUARD_* variables set, waits for it, passes its exit status on (128+N when signal N ended
// it), lists the reports that the run's processes wrote, with the command that reads them, and
// writes each report's rank summary beside it (REPORT.summary.json; not with --no-summary).
//
// The list: every process of the run inherits MEMGUARD_RUN_MANIFEST, a file in a private
// temporary directory, and the library appends the absolute path of each report it creates to it
// (track/recorder.cpp). So the reports of torchrun's ranks, multiprocessing workers (spawned or
// forked) and subprocesses are listed wherever their templates put them.
//
// Signals: CMD runs in this process group, in the foreground when this is. A signal that the
// kernel sends to the whole foreground group (a terminal's Ctrl-C, Ctrl-\ or hang-up) reaches CMD
// directly, so it is not forwarded: CMD gets it once, as it would without memguard (torchrun,
// which passes SIGINT and SIGTERM on to its workers, would otherwise shut down twice). A signal
// sent to this process alone (kill PID, a job scheduler's SIGTERM) is forwarded. memguard itself
// does not end on them: it waits for CMD and ends with CMD's status.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>

#include "cli.h"
#include "common/config.h"
#include "common/text.h"
#include "launch.h"
#include "rank_summary.h"

extern char** environ;

namespace memguard::cli {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

volatile sig_atomic_t g_child = 0;

void forward_signal(int sig, siginfo_t* info, void*) {
    if (info && info->si_code == SI_KERNEL) return;  // the terminal's: the whole group got it
    const int saved = errno;
    const pid_t child = static_cast<pid_t>(g_child);
    if (child > 0) ::kill(child, sig);
    errno = saved;
}

/// The run's private directory (mode 0700) and its manifest; removed at the end.
class RunDirectory {
public:
    RunDirectory() {
        const char* tmp = std::getenv("TMPDIR");
        std::string base = tmp && tmp[0] == '/' ? tmp : "/tmp";
        std::string pattern = base + "/memguard-run.XXXXXX";
        if (!::mkdtemp(pattern.data())) {
            throw CommandError("cannot create a temporary directory in '" + base + "': " + std::strerror(errno));
        }
        dir_ = pattern;
    }
    ~RunDirectory() {
        ::unlink(manifest().c_str());
        ::rmdir(dir_.c_str());
    }
    RunDirectory(const RunDirectory&) = delete;
    RunDirectory& operator=(const RunDirectory&) = delete;
    std::string manifest() const { return dir_ + "/reports"; }

private:
    std::string dir_;
};

/// The environment of CMD: this one, with `settings` set.
std::vector<std::string> child_environment(const EnvSettings& settings) {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        const std::string entry = *e;
        const std::string name = entry.substr(0, entry.find('='));
        bool replaced = false;
        for (const auto& s : settings) replaced = replaced || s.first == name;
        if (!replaced) out.push_back(entry);
    }
    for (const auto& [name, value] : settings) out.push_back(name + "=" + value);
    return out;
}

struct Outcome {
    int status = 0;          // what memguard exits with
    std::string exec_error;  // CMD could not be started
};

/// Starts CMD, forwards the signals, waits. The signals are blocked from before the fork until
/// the child's pid is known, so none arrives while there is no one to forward it to.
Outcome spawn_and_wait(const std::vector<std::string>& command, const std::vector<std::string>& env) {
    sigset_t forwarded, old_mask;
    sigemptyset(&forwarded);
    for (int sig : kForwarded) sigaddset(&forwarded, sig);
    sigprocmask(SIG_BLOCK, &forwarded, &old_mask);
    for (int sig : kForwarded) {
        // A signal ignored here (nohup's SIGHUP) stays ignored, in CMD too, as a shell leaves it.
        struct sigaction old {};
        if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        struct sigaction sa {};
        sa.sa_sigaction = forward_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, nullptr);
    }
    int pipe_fds[2];  // the child's exec error; closed by a successful exec (O_CLOEXEC)
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        throw CommandError(std::string("cannot create a pipe: ") + std::strerror(errno));
    std::vector<char*> argv, envp;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = fork();
    if (pid < 0) throw CommandError(std::string("cannot start the command: ") + std::strerror(errno));
    if (pid == 0) {
        // Handlers go back to the default at exec; the mask does not.
        sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        ::close(pipe_fds[0]);
        execvpe(argv[0], argv.data(), envp.data());
        const int err = errno;
        ssize_t unused = ::write(pipe_fds[1], &err, sizeof err);
        (void)unused;
        _exit(127);
    }
    g_child = pid;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::close(pipe_fds[1]);
    Outcome out;
    int err = 0;
    ssize_t n;
    do {
        n = ::read(pipe_fds[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    ::close(pipe_fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g_child = 0;
    if (n == static_cast<ssize_t>(sizeof err)) {
        out.exec_error = std::strerror(err);
        out.status = err == ENOENT ? 127 : 126;  // as a shell says "not found" and "cannot execute"
        return out;
    }
    out.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    return out;
}

/// The manifest's report paths, in the order the reports were created, each once.
std::vector<std::string> read_manifest(const std::string& path) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return out;
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0) text.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    size_t i = 0;
    while (i < text.size()) {
        size_t end = text.find('\n', i);
        if (end == std::string::npos) break;  // a line cut short: a process still writing it
        std::string line = text.substr(i, end - i);
        i = end + 1;
        if (!line.empty() && seen.insert(line).second) out.push_back(line);
    }
    return out;
}

/// A nested `memguard run` passes its reports on to the enclosing run's manifest.
void pass_on(const std::vector<std::string>& reports, const char* outer) {
    if (!outer || outer[0] != '/') return;
    // Created when no process of the outer run has written it yet, as the library creates it.
    int fd = ::open(outer, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    for (const std::string& r : reports) {
        const std::string line = r + "\n";
        if (line.size() < PIPE_BUF && ::write(fd, line.data(), line.size()) < 0) break;
    }
    ::close(fd);
}

std::string current_directory() {
    char cwd[PATH_MAX];
    return getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string();
}

/// `path` relative to `cwd` when it lies under it.
std::string shown_path(const std::string& path, const std::string& cwd) {
    if (!cwd.empty() && cwd != "/" && path.size() > cwd.size() + 1 && path.compare(0, cwd.size(), cwd) == 0 &&
        path[cwd.size()] == '/') {
        return path.substr(cwd.size() + 1);
    }
    return path;
}

std::string directory_of(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == 0 ? "/" : path.substr(0, slash);
}

void print_reports(const std::vector<std::string>& reports, const std::string& run_id) {
    if (reports.empty()) {
        std::cerr << "memguard: no report was written (no process of the command allocated CUDA memory)\n";
        return;
    }
    const std::string cwd = current_directory();
    std::string next;
    if (reports.size() == 1) {
        std::cerr << "memguard: report: " << text::printable(shown_path(reports[0], cwd)) << "\n";
        next = "memguard top " + shell_quote(shown_path(reports[0], cwd));
    } else {
        std::cerr << "memguard: " << reports.size() << " reports (run " << text::printable(run_id) << "):\n";
        bool one_directory = true;
        for (const std::string& r : reports) {
            std::cerr << "  " << text::printable(shown_path(r, cwd)) << "\n";
            one_directory = one_directory && directory_of(r) == directory_of(reports[0]);
        }
        if (one_directory) {
            const std::string dir = directory_of(reports[0]);
            next = "memguard merge --run " + shell_quote(run_id) + (dir == cwd ? "" : " " + shell_quote(dir));
        } else {
            next = "memguard merge";
            for (const std::string& r : reports) next += " " + shell_quote(shown_path(r, cwd));
        }
    }
    std::cerr << "memguard: read " << (reports.size() == 1 ? "it" : "them") << ": " << text::printable(next) << "\n";
}

/// Writes the rank summary beside each report (rank_summary.h, docs/rank-summary.md), then says
/// where; a report that cannot be read is one warning and gets none.
void write_summaries(const std::vector<std::string>& reports) {
    const std::string cwd = current_directory();
    std::vector<std::string> written;
    for (const std::string& r : reports) {
        try {
            written.push_back(write_rank_summary(r));
        } catch (const std::exception& e) {
            std::cerr << "memguard: warning: no summary of " << text::printable(shown_path(r, cwd)) << ": "
                      << text::printable(e.what()) << "\n";
        }
    }
    if (written.size() == 1) {
        std::cerr << "memguard: summary: " << text::printable(shown_path(written[0], cwd)) << "\n";
    } else if (!written.empty()) {
        std::cerr << "memguard: " << written.size() << " rank summaries beside the reports (REPORT.summary.json)\n";
    }
}

}  // namespace

int run_run(const Args& args) {
    const std::string library = find_library(args);
    EnvSettings settings = launch_settings(args, library, false);
    std::string run_id;
    for (const auto& [name, value] : settings) {
        if (name == "MEMGUARD_RUN_ID") run_id = value;
    }
    const char* outer_manifest = std::getenv("MEMGUARD_RUN_MANIFEST");
    const std::string outer = outer_manifest ? outer_manifest : "";
    // A bounded report's library runs this program to fold its parts (track/follower.h).
    if (std::getenv("MEMGUARD_CLI") == nullptr) settings.emplace_back("MEMGUARD_CLI", self_program());
    RunDirectory dir;
    settings.emplace_back("MEMGUARD_RUN_MANIFEST", dir.manifest());
    const Outcome outcome = spawn_and_wait(args.command_line, child_environment(settings));
    if (!outcome.exec_error.empty()) {
        std::cerr << "memguard: error: cannot run '" << text::printable(args.command_line[0])
                  << "': " << outcome.exec_error << "\n";
        return outcome.status;
    }
    const std::vector<std::string> reports = read_manifest(dir.manifest());
    print_reports(reports, run_id);
    // A run inside another passes its reports on: the outermost run summarizes them, once.
    if (!args.no_summary && outer.empty()) write_summaries(reports);
    pass_on(reports, outer.empty() ? nullptr : outer.c_str());
    return outcome.status;
}

}  // namespace memguard::cli

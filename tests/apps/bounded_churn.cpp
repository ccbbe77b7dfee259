// A churn that outgrows MEMGUARD_MAX_REPORT_SIZE, paced so that the report's follower (`memguard
// compact --follow`, which libmemguard.so starts at the report's first new part) can fold the
// parts as they close; then it looks at the follower from inside the host:
//
//   bounded_churn PAIRS PAUSE_EVERY PAUSE_MS
//
// cudaMalloc/cudaFree pairs from 4 sites over a ring of 64 blocks (sizes 4 KiB to 1 MiB, the same
// every run), a pause of PAUSE_MS every PAUSE_EVERY pairs, then:
//   info follower_pid N        the process whose command line is `... compact --follow ... <pid>.mgr`
//                              (0: none found)
//   info follower_is_child 0|1 its parent is this process
//   info follower_ld_preload 0|1, info follower_memguard_env 0|1
//                              its environment holds LD_PRELOAD, a MEMGUARD_* variable
//   info inherited_pipe_closed 0|1
//                              a pipe this process made (no O_CLOEXEC) reads its end once this
//                              process closed its write end: the follower does not hold it
//   info wait_child 0|1, info wait_errno E
//                              waitpid(-1, WNOHANG): what a host's wait() would meet (0 and ECHILD:
//                              this process has no child, running or exited)
#include "app_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// The NUL-separated strings of a /proc file.
std::vector<std::string> strings_of(const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\0') {
            out.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    return out;
}

bool ends_with(const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

/// The follower of this process's report: `memguard compact --follow ... /<pid>.mgr`.
long find_follower() {
    const std::string report = "/" + std::to_string(getpid()) + ".mgr";
    DIR* d = opendir("/proc");
    if (d == nullptr) return 0;
    long found = 0;
    while (const dirent* e = readdir(d)) {
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != '\0') continue;
        const std::vector<std::string> argv = strings_of(read_all("/proc/" + std::string(e->d_name) + "/cmdline"));
        bool compact = false, follow = false, mine = false;
        for (const std::string& a : argv) {
            compact |= a == "compact";
            follow |= a == "--follow";
            mine |= ends_with(a, report);
        }
        if (compact && follow && mine) found = pid;
    }
    closedir(d);
    return found;
}

}  // namespace

int main(int argc, char** argv) {
    app::init_log();
    if (argc != 4) {
        std::fprintf(stderr, "usage: bounded_churn PAIRS PAUSE_EVERY PAUSE_MS\n");
        return 2;
    }
    const long pairs = std::atol(argv[1]), every = std::atol(argv[2]), pause_ms = std::atol(argv[3]);
    // A pipe left open across exec, as a host's may be: the follower must not keep it open.
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 3;
    std::vector<void*> ring(64, nullptr);
    for (long i = 0; i < pairs; ++i) {
        void*& slot = ring[static_cast<size_t>(i % 64)];
        if (slot != nullptr) app::check("cudaFree", cudaFree(slot), cudaSuccess);
        const size_t size = size_t{4096} << static_cast<size_t>((i * 7 + i / 500) % 9);
        app::check("cudaMalloc", cudaMalloc(&slot, size), cudaSuccess);
        if (every > 0 && i % every == every - 1) {
            const timespec t{pause_ms / 1000, (pause_ms % 1000) * 1000000};
            nanosleep(&t, nullptr);
        }
    }
    for (void* p : ring) {
        if (p != nullptr) app::check("cudaFree", cudaFree(p), cudaSuccess);
    }
    const long follower = find_follower();
    app::log_info("follower_pid", static_cast<unsigned long long>(follower));
    if (follower > 0) {
        const std::string stat = read_all("/proc/" + std::to_string(follower) + "/stat");
        const size_t paren = stat.rfind(')');
        long ppid = 0;
        if (paren != std::string::npos) std::sscanf(stat.c_str() + paren + 1, " %*c %ld", &ppid);
        app::log_info("follower_is_child", ppid == getpid() ? 1 : 0);
        bool preload = false, memguard = false;
        for (const std::string& v : strings_of(read_all("/proc/" + std::to_string(follower) + "/environ"))) {
            preload |= v.rfind("LD_PRELOAD=", 0) == 0;
            memguard |= v.rfind("MEMGUARD_", 0) == 0;
        }
        app::log_info("follower_ld_preload", preload ? 1 : 0);
        app::log_info("follower_memguard_env", memguard ? 1 : 0);
    }
    close(pipe_fds[1]);
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    char byte;
    app::log_info("inherited_pipe_closed", read(pipe_fds[0], &byte, 1) == 0 ? 1 : 0);
    int status = 0;
    errno = 0;
    const pid_t any = waitpid(-1, &status, WNOHANG);
    app::log_info("wait_child", any == -1 ? 0 : 1);
    app::log_info("wait_errno", static_cast<unsigned long long>(errno));
    return 0;
}

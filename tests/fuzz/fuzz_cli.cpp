// libFuzzer harness of the memguard commands: the input's first byte picks a command line (kCommands),
// the rest is the report it reads (for SUMMARY, the rank summary it reads). The commands run in this
// process through the CLI's own entry point (tools/memguard/main.cpp, its main() renamed by the
// build), so argument handling, error reporting and exit codes are the real ones; stdout goes to
// /dev/null, std::cerr to a buffer, and the files plot and export write go to a directory of this
// process's own (removed at exit). diff and merge read the input next to a golden report.
//
// A finding: a crash, a sanitizer report, an exception that escapes, a hang (-timeout), too much
// memory (-rss_limit_mb, -malloc_limit_mb), or exit code 1 ("internal error": a report that asks for
// something absurd must get a clear error, exit code 2; for the gates, check and diff --fail-if,
// exit code 1 is also their answer, so only an internal error's message makes it a finding).
// MEMGUARD_FUZZ_ALLOW_INTERNAL=1 lets internal errors pass, to look past one that is known. Frames are not given file:line
// (MEMGUARD_ADDR2LINE is empty: no addr2line per input); module files a report names are opened as
// the CLI opens them.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace memguard::cli {
int main_impl(int argc, char** argv);  // tools/memguard/main.cpp
}

namespace {

// `IN` is the input's report, `GOLDEN` a golden report (diff, merge).
const std::vector<std::vector<std::string>> kCommands = {
    {"summary", "IN"},
    {"summary", "--json", "IN"},
    {"top", "IN"},
    {"top", "IN", "--at", "exit"},
    {"top", "IN", "--at", "0.5"},
    {"top", "IN", "--kind", "pinned"},
    {"top", "IN", "--kind", "physical", "--at", "exit"},
    {"top", "IN", "--kind", "all", "--at", "0.5"},
    {"top", "IN", "--kind", "all", "-n", "2", "--frames", "2"},
    {"top", "IN", "--pool"},
    {"top", "IN", "--pool", "--at", "exit", "--kind", "all"},
    {"top", "IN", "--segments"},
    {"top", "IN", "--segments", "--pool", "--at", "0.5"},
    {"top", "--json", "IN"},
    {"top", "--json", "IN", "--kind", "all", "--at", "exit", "--pool"},
    {"top", "--json", "IN", "--segments", "--kind", "physical"},
    {"top", "IN", "--by", "category"},
    {"top", "--json", "IN", "--by", "category", "--at", "exit", "--frames", "1"},
    {"graphs", "IN"},
    {"graphs", "--json", "IN"},
    {"hazards", "IN"},
    {"hazards", "--json", "IN", "--frames", "1"},
    {"cycles", "IN"},
    {"cycles", "IN", "--all"},
    {"cycles", "--json", "IN"},
    {"phases", "IN"},
    {"phases", "IN", "--marks"},
    {"phases", "IN", "--segments"},
    {"phases", "--json", "IN", "--marks"},
    {"phases", "--json", "IN"},
    {"steps", "IN"},
    {"steps", "IN", "--segments"},
    {"steps", "--json", "IN", "--frames", "1"},
    {"oom", "IN"},
    {"oom", "--json", "IN", "--frames", "1"},
    {"diff", "IN", "GOLDEN"},
    {"diff", "--json", "GOLDEN", "IN", "-n", "2"},
    {"diff", "IN", "GOLDEN", "--segments"},
    {"merge", "IN", "GOLDEN"},
    {"merge", "--json", "GOLDEN", "IN"},
    {"plot", "IN", "-o", "out.svg"},
    {"plot", "IN", "-o", "out.html"},
    {"export", "--memory-viz", "IN", "-o", "out.pickle"},
    {"export", "--memory-viz", "IN", "-o", "out.pickle", "--frames", "1"},
    {"export", "--perfetto", "IN", "-o", "out.json"},
    // The gates: exit 1 is their answer when a limit is exceeded (see is_internal_error).
    {"check", "IN", "--max-peak", "1GiB", "--max-live-at-exit", "1MiB", "--no-hazards", "--no-oom"},
    {"check", "--json", "IN", "--max-tensor-peak", "1MiB", "--max-tensor-live-at-exit", "0", "--max-gc-freed", "1KiB"},
    {"check", "IN", "--max-peak", "0", "--max-live-at-exit", "0", "--max-gc-freed", "0", "--no-oom"},
    {"diff", "GOLDEN", "IN", "--fail-if", "peak>+5%", "--fail-if", "live_at_exit>+100MiB", "--fail-if", "oom>0"},
    {"diff", "--json", "IN", "GOLDEN", "--fail-if", "gc_freed<-10%", "--fail-if", "phase[step].incremental_peak>=+1B",
     "--fail-if", "compiles>+0"},
    {"diff", "IN", "IN", "--fail-if", "tensor_peak>+1%", "--fail-if", "tensor_live_at_exit>0", "--fail-if",
     "peak<=-1GiB"},
    // Appended, so that the corpus's selector bytes keep their commands.
    {"cycles", "--explain", "IN"},
    {"cycles", "--explain", "--json", "IN", "--frames", "1"},
    {"export", "--jsonl", "IN", "-o", "out.jsonl"},
    {"summarize", "IN"},
    {"merge", "--json", "IN", "GOLDEN", "GOLDEN"},
    // The input as a rank summary (merge reads FILE.summary.json as one).
    {"merge", "--json", "SUMMARY", "GOLDEN", "GOLDEN"},
    {"merge", "SUMMARY", "SUMMARY", "SUMMARY"},
};

std::string g_dir;                                   // this process's directory for the input and the output files
std::string g_golden;                                // the golden report diff and merge compare with
std::ostringstream* g_err = new std::ostringstream;  // never destroyed: std::cerr writes to it until exit
bool g_allow_internal = false;

/// Whether an exit code 1 of `command` is an internal error. For the gates (check, diff --fail-if)
/// exit code 1 also means "a limit was exceeded": there only main_impl's own messages for internal
/// errors (an exception that is not a report or usage error, running out of memory, a failed
/// write of the output) make it one.
bool is_internal_error(const std::vector<std::string>& command, int rc, const std::string& err) {
    if (rc != 1) return false;
    bool gate = command[0] == "check";
    for (const std::string& w : command) gate = gate || w == "--fail-if";
    if (!gate) return true;
    for (const char* internal :
         {"memguard: internal error", "memguard: error: out of memory", "memguard: error: cannot write the output"}) {
        if (err.find(internal) != std::string::npos) return true;
    }
    return false;
}

void fail(const char* what) {
    std::perror(what);
    std::exit(1);
}

void write_input(const std::string& path, const uint8_t* data, size_t size) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) fail("fuzz_cli: cannot write the input");
    while (size > 0) {
        ssize_t n = ::write(fd, data, size);
        if (n <= 0) fail("fuzz_cli: cannot write the input");
        data += n;
        size -= static_cast<size_t>(n);
    }
    ::close(fd);
}

/// Removes the working directory and what the commands left in it (at exit; a crash leaves it).
void remove_dir() {
    if (DIR* d = ::opendir(g_dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
                ::unlink((g_dir + "/" + e->d_name).c_str());
            }
        }
        ::closedir(d);
    }
    ::rmdir(g_dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/memguard-fuzz-cli.XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) fail("fuzz_cli: mkdtemp");
    g_dir = templ;
    std::atexit(remove_dir);
    g_golden = std::string(MEMGUARD_FUZZ_GOLDEN_DIR) + "/train.mgr";
    ::setenv("MEMGUARD_ADDR2LINE", "", 1);
    const char* allow = std::getenv("MEMGUARD_FUZZ_ALLOW_INTERNAL");
    g_allow_internal = allow != nullptr && std::strcmp(allow, "1") == 0;
    // The commands' answers are not looked at; libFuzzer and the sanitizers report on stderr.
    int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, STDOUT_FILENO) < 0) fail("fuzz_cli: /dev/null");
    ::close(null_fd);
    std::cerr.rdbuf(g_err->rdbuf());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::vector<std::string>& command = kCommands[data[0] % kCommands.size()];
    const bool summary = std::find(command.begin(), command.end(), "SUMMARY") != command.end();
    write_input(g_dir + (summary ? "/in.summary.json" : "/in.mgr"), data + 1, size - 1);
    std::vector<std::string> words = {"memguard"};
    for (const std::string& w : command) {
        // Output files (out.*) go to the working directory too, new each time.
        bool out = w.rfind("out.", 0) == 0;
        words.push_back(w == "IN"        ? g_dir + "/in.mgr"
                        : w == "SUMMARY" ? g_dir + "/in.summary.json"
                        : w == "GOLDEN"  ? g_golden
                        : out            ? g_dir + "/" + w
                                         : w);
        if (out) ::unlink(words.back().c_str());
    }
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    g_err->str("");
    int rc = memguard::cli::main_impl(static_cast<int>(words.size()), argv.data());
    std::fflush(stdout);
    if (is_internal_error(command, rc, g_err->str()) && !g_allow_internal) {
        std::string line;
        for (const std::string& w : command) line += " " + w;
        std::fprintf(stderr, "fuzz_cli: memguard%s: exit code 1\n%s", line.c_str(), g_err->str().c_str());
        std::abort();
    }
    return 0;
}

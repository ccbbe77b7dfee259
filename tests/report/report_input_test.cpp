// The commands of the streaming reader on a report given as a pipe (tools/memguard/report_input.h):
// read once and copied to a spool that a second pass reads, each answer byte for byte the one from
// the file; a spool that cannot be created or written falls back to load_report with one line. The
// golden runs through FIFOs are report.golden_pipe.* (golden_pipe.sh).
#include <dirent.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace memguard::report {
namespace {

using test::contains;

struct Ran {
    int rc = -1;
    std::string out, err;
};

/// `command` through bash, with `cli` standing for the memguard binary; stdout and stderr apart.
Ran run(const test::TempDir& dir, const std::string& command) {
    const std::string err_path = dir.path() + "/stderr";
    std::string line = command;
    for (size_t at; (at = line.find("MEMGUARD")) != std::string::npos;)
        line.replace(at, 8, "'" + test::cli_path() + "'");
    const std::string cmd = "bash -c '" +
                            [&] {
                                std::string quoted;
                                for (char c : line) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
                                return quoted;
                            }() +
                            "' 2>'" + err_path + "'";
    Ran r;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = test::read_file(err_path);
    return r;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
        text.replace(at, from.size(), to);
    return text;
}

/// Entries of `path` other than . and ..
size_t entries(const std::string& path) {
    size_t n = 0;
    if (DIR* d = opendir(path.c_str())) {
        while (dirent* e = readdir(d)) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
        closedir(d);
    }
    return n;
}

/// Every step a new peak and then a fall, over a growing live set: the peak keeps coming back, so
/// the streaming reader leaves it to a second pass (report.Stream.APeakThatKeepsComingBackIsLeftToASecondPass),
/// which a pipe's spool serves. About 400 KB.
std::string returning_peak_report() {
    std::string body = test::kHeader;
    int64_t t = 1;
    for (int i = 0; i < 4000; ++i) {
        body += "A " + std::to_string(t++) + " 1 " + std::to_string(0x100000 + 2 * i) +
                " 100 device cudaMalloc 0 - 0\n";
        body += "A " + std::to_string(t++) + " 1 " + std::to_string(0x100000 + 2 * i + 1) +
                " 10 device cudaMalloc 0 - 0\n";
        body += "F " + std::to_string(t++) + " 1 " + std::to_string(0x100000 + 2 * i + 1) + " 0 cudaFree -\n";
        if (i % 1000 == 999) body += "s " + std::to_string(t++) + " 1 " + std::to_string(i / 1000 + 1) + " api step\n";
    }
    return body + "Z " + std::to_string(t) + "\n";
}

const std::vector<std::string> kCommands = {
    "summary",
    "summary --json",
    "top",
    "top --json",
    "top --at exit",
    "top --at 0.000005",
    "top --by category",
    "top --by category --json",
    "top --by category --at exit",
    "phases",
    "phases --marks",
    "steps",
    "steps --json",
    "oom",
    "oom --json",
    "cycles",
    "cycles --json",
    "cycles --explain",
};

/// `memguard ARGS FILE` and `cat FILE | memguard ARGS /dev/stdin` give the same, the name aside; the
/// spool leaves nothing in TMPDIR.
void expect_same_through_a_pipe(const test::TempDir& dir, const std::string& file, const std::string& tmp) {
    for (const std::string& args : kCommands) {
        SCOPED_TRACE(args + " " + file);
        const Ran whole = run(dir, "MEMGUARD " + args + " '" + file + "'");
        const Ran piped = run(dir, "cat '" + file + "' | TMPDIR='" + tmp + "' MEMGUARD " + args + " /dev/stdin");
        EXPECT_EQ(piped.rc, whole.rc);
        EXPECT_EQ(piped.out, replaced(whole.out, file, "/dev/stdin"));
        EXPECT_EQ(piped.err, replaced(whole.err, file, "/dev/stdin"));
        EXPECT_EQ(entries(tmp), 0u);
    }
    // diff and merge: the pipe as either side, the other a file.
    for (const std::string& args : {"diff '" + file + "' /dev/stdin", "diff --json /dev/stdin '" + file + "'",
                                    "merge --json /dev/stdin '" + file + "'"}) {
        SCOPED_TRACE(args);
        const Ran whole = run(dir, "MEMGUARD " + replaced(args, "/dev/stdin", "'" + file + "'"));
        const Ran piped = run(dir, "cat '" + file + "' | TMPDIR='" + tmp + "' MEMGUARD " + args);
        EXPECT_EQ(piped.rc, whole.rc);
        // The file's own name stays where the file is named; the pipe's side says /dev/stdin.
        EXPECT_EQ(replaced(piped.out, "/dev/stdin", file), whole.out);
        EXPECT_EQ(replaced(piped.err, "/dev/stdin", file), whole.err);
        EXPECT_EQ(entries(tmp), 0u);
    }
}

TEST(Pipe, EveryCommandReadsAPipeOnceAndAnswersAsFromTheFile) {
    test::TempDir dir;
    test::TempDir tmp;
    std::vector<std::string> files = {dir.write("peak.mgr", returning_peak_report())};
    for (const char* name : {"train.mgr", "steps_growth.mgr", "oom_steps_alloc.mgr", "cycles_explain.mgr",
                             "categories_alloc.mgr", "warnings.mgr"}) {
        files.push_back(std::string(MEMGUARD_GOLDEN_DIR) + "/" + name);
    }
    for (const std::string& file : files) expect_same_through_a_pipe(dir, file, tmp.path());
}

TEST(Pipe, ASpoolThatCannotBeCreatedIsReadWholeWithOneLine) {
    test::TempDir dir;
    const std::string file = dir.write("peak.mgr", returning_peak_report());
    const std::string missing = dir.path() + "/no-such-directory";
    for (const char* args : {"summary", "top", "steps", "oom", "cycles"}) {
        SCOPED_TRACE(args);
        const Ran whole = run(dir, "MEMGUARD " + std::string(args) + " '" + file + "'");
        const Ran piped = run(dir, "cat '" + file + "' | TMPDIR='" + missing + "' MEMGUARD " + args + " /dev/stdin");
        EXPECT_EQ(piped.rc, 0);
        EXPECT_EQ(piped.out, replaced(whole.out, file, "/dev/stdin"));
        EXPECT_EQ(piped.err, "memguard: warning: /dev/stdin: cannot copy it to a temporary file in " + missing +
                                 " (No such file or directory): it is read whole, in memory\n");
    }
}

TEST(Pipe, ASpoolThatFillsUpIsReadWholeWithOneLine) {
    // A file size limit of 4 KiB (SIGXFSZ ignored, so the write fails with EFBIG) stops the spool
    // mid-report, as a full disk would: the report is read whole from what the spool holds, what the
    // failed write held, and the rest of the pipe.
    test::TempDir dir;
    test::TempDir tmp;
    const std::string file = dir.write("peak.mgr", returning_peak_report());
    for (const char* args : {"summary", "top --by category", "steps --json", "oom", "diff /dev/stdin "}) {
        SCOPED_TRACE(args);
        std::string command = args;
        const bool diff = command.rfind("diff", 0) == 0;
        const Ran whole = run(dir, "MEMGUARD " +
                                       (diff ? "diff '" + file + "' '" + file + "'" : command + " '" + file + "'"));
        const Ran piped = run(dir, "cat '" + file + "' | (trap \"\" XFSZ; ulimit -f 4; TMPDIR='" + tmp.path() +
                                       "' exec MEMGUARD " +
                                       (diff ? "diff /dev/stdin '" + file + "'" : command + " /dev/stdin") + ")");
        EXPECT_EQ(piped.rc, 0);
        EXPECT_EQ(replaced(piped.out, "/dev/stdin", file), whole.out);
        EXPECT_EQ(piped.err, "memguard: warning: /dev/stdin: cannot copy it to a temporary file in " + tmp.path() +
                                 " (File too large after 4096 bytes): it is read whole, in memory\n");
        EXPECT_EQ(entries(tmp.path()), 0u);
    }
}

}  // namespace
}  // namespace memguard::report

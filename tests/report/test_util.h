// Helpers shared by the report tests.
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/fold.h"
#include "report/report.h"

namespace memguard::report::test {

inline const std::string kHeader = "MEMGUARD-REPORT 1\n";

/// Parses a report made of the header and `body`.
inline Report parse(const std::string& body) { return parse_report(kHeader + body, "t.mgr"); }

/// The ReportError message for `content`, or "<no error>".
inline std::string error_of(const std::string& content) {
    try {
        parse_report(content, "t.mgr");
    } catch (const ReportError& e) {
        return e.what();
    }
    return "<no error>";
}

#ifdef MEMGUARD_CLI_PATH
/// The memguard binary the tests run: MEMGUARD_TEST_CLI when set (say an older build, to see a
/// test fail without its fix), else the one built with them.
inline std::string cli_path() {
    const char* other = getenv("MEMGUARD_TEST_CLI");
    return other != nullptr && *other != '\0' ? other : MEMGUARD_CLI_PATH;
}

struct CliResult {
    int rc = -1;
    std::string out;
};

/// Runs the memguard CLI through the shell with `args` (already quoted as needed) after the shell
/// words in `prefix` (variable assignments, or "cd DIR &&"); stderr joins stdout.
inline CliResult run_cli(const std::string& args, const std::string& prefix = "") {
    std::string cmd = prefix + " '" + cli_path() + "' " + args + " 2>&1";
    CliResult r;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}
#endif

inline bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

#ifdef MEMGUARD_GOLDEN_DIR
/// The golden reports (tests/report/golden/*.mgr), sorted; not a folded one (a fold beside it,
/// report/fold.h: load_report reads its detail, the streaming reader its fold: golden runs
/// bounded_folded_* check it).
inline std::vector<std::string> golden_reports() {
    std::vector<std::string> out;
    DIR* d = opendir(MEMGUARD_GOLDEN_DIR);
    if (d == nullptr) return out;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        const std::string path = std::string(MEMGUARD_GOLDEN_DIR) + "/" + name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".mgr") == 0 && find_folds(path).empty()) {
            out.push_back(path);
        }
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}
#endif

/// A fresh directory under $TMPDIR, removed with its files (not subdirectories) on destruction.
class TempDir {
public:
    TempDir() {
        const char* tmp = std::getenv("TMPDIR");
        std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/memguard-test.XXXXXX";
        if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = templ;
    }
    ~TempDir() {
        if (DIR* d = opendir(path_.c_str())) {
            while (dirent* e = readdir(d)) {
                std::string name = e->d_name;
                if (name != "." && name != "..") unlink((path_ + "/" + name).c_str());
            }
            closedir(d);
        }
        rmdir(path_.c_str());
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    /// Writes `content` to a file in the directory and returns its path.
    std::string write(const std::string& name, const std::string& content) const {
        std::string p = path_ + "/" + name;
        std::ofstream out(p, std::ios::binary);
        out << content;
        return p;
    }

private:
    std::string path_;
};

}  // namespace memguard::report::test

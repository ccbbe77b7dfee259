#include "launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

#include "common/config.h"

extern char** environ;

namespace memguard::cli {

std::string self_program() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0)
        throw CommandError(std::string("cannot find this program's path (/proc/self/exe): ") + std::strerror(errno) +
                           "; give --library PATH");
    return std::string(buf, static_cast<size_t>(n));
}

namespace {

std::string self_dir() {
    const std::string exe = self_program();
    return exe.substr(0, exe.find_last_of('/'));
}

/// Whether `list` (LD_PRELOAD: entries separated by colons or spaces) names `library`: the same
/// path, or another path of the same file.
bool preloads(const std::string& list, const std::string& library) {
    struct stat lib {};
    const bool lib_ok = stat(library.c_str(), &lib) == 0;
    size_t i = 0;
    while (i < list.size()) {
        size_t end = list.find_first_of(": ", i);
        if (end == std::string::npos) end = list.size();
        const std::string entry = list.substr(i, end - i);
        i = end + 1;
        if (entry.empty()) continue;
        if (entry == library) return true;
        struct stat st {};
        if (lib_ok && stat(entry.c_str(), &st) == 0 && st.st_dev == lib.st_dev && st.st_ino == lib.st_ino) return true;
    }
    return false;
}

void set(EnvSettings& out, const std::string& name, const std::string& value) {
    for (auto& [n, v] : out) {
        if (n == name) {
            v = value;
            return;
        }
    }
    out.emplace_back(name, value);
}

}  // namespace

std::string find_library(const Args& args) {
    const bool given = !args.library.empty();
    const std::string path = given ? args.library : self_dir() + "/../lib/libmemguard.so";
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        throw CommandError(
            "cannot use the memguard library '" + path + "': " + std::strerror(errno) +
            (given ? "" : " (it is looked for in ../lib next to the memguard program; give --library PATH)"));
    }
    if (!S_ISREG(st.st_mode)) throw CommandError("cannot use the memguard library '" + path + "': not a regular file");
    if (access(path.c_str(), R_OK) != 0) {
        throw CommandError("cannot use the memguard library '" + path + "': " + std::strerror(errno));
    }
    // Absolute, without links or "..": the command may change its directory before it loads it,
    // and the path goes into every child's environment.
    char real[PATH_MAX];
    if (!realpath(path.c_str(), real)) {
        throw CommandError("cannot use the memguard library '" + path + "': " + std::strerror(errno));
    }
    return real;
}

EnvSettings launch_settings(const Args& args, const std::string& library, bool inherited) {
    EnvSettings out;
    const char* preload = std::getenv("LD_PRELOAD");
    const std::string old = preload ? preload : "";
    out.emplace_back("LD_PRELOAD", preloads(old, library) ? old : old.empty() ? library : library + ":" + old);

    const char* id = std::getenv("MEMGUARD_RUN_ID");
    if (id) {
        if (std::string problem = config_value_problem("MEMGUARD_RUN_ID", id); !problem.empty()) {
            throw CommandError(problem + " (unset it, or give --run-id)");
        }
    }
    out.emplace_back("MEMGUARD_RUN_ID", id ? id : new_run_id());
    if (inherited) {
        for (char** e = environ; e && *e; ++e) {
            const std::string entry = *e;
            const size_t eq = entry.find('=');
            if (entry.rfind("MEMGUARD_", 0) != 0 || eq == std::string::npos) continue;
            const std::string name = entry.substr(0, eq);
            if (name == "MEMGUARD_RUN_ID" || name == "MEMGUARD_RUN_MANIFEST") continue;
            set(out, name, entry.substr(eq + 1));
        }
    }
    for (const auto& [name, value] : args.settings) set(out, name, value);
    return out;
}

std::string new_run_id() {
    char stamp[32] = "00000000-000000";
    std::time_t now = std::time(nullptr);
    std::tm local{};
    if (localtime_r(&now, &local)) std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    uint32_t bits = 0;
    try {
        std::random_device rd;
        bits = rd();
    } catch (const std::exception&) {
        bits = static_cast<uint32_t>(getpid()) * 2654435761u ^ static_cast<uint32_t>(now);
    }
    char id[64];
    std::snprintf(id, sizeof id, "%s-%08x", stamp, bits);
    return id;
}

std::string shell_quote(const std::string& s) {
    bool safe = !s.empty();
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        std::strchr("_-./:,+=@%", c) != nullptr;
        if (!ok || c == '\0') safe = false;
    }
    if (safe) return s;
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out.push_back(c);
        }
    }
    return out + "'";
}

}  // namespace memguard::cli

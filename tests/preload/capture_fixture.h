// The fixture of the stream capture and CUDA graph tests (docs/report-format.md, "Added in minor
// 1"): each test runs a capture application without memguard and under it, expects the two runs
// to print the same thing (so every call memguard interposes returned what the runtime returned),
// and checks the report's capture, graph and hazard records against what the application logged.
#pragma once

#include "log_checks.h"
#include "preload_fixture.h"

#include <algorithm>
#include <string>
#include <vector>

namespace preload_test {

class CaptureTest : public PreloadTest {
protected:
    /// Runs `app args` without memguard and with it. Expects both to exit 0, the plain run to
    /// write nothing on stderr, and both to print the same lines (addresses, handles and thread
    /// ids aside). Returns the run under memguard.
    ChildResult run_compared(const std::string& app, const std::vector<std::string>& args) {
        ChildResult plain = run(app, args, plain_env());
        EXPECT_EQ(plain.exit_code, 0) << describe(plain);
        EXPECT_TRUE(plain.err.empty()) << plain.err;
        ChildResult preloaded = run(app, args, preload_env());
        EXPECT_EQ(preloaded.exit_code, 0) << describe(preloaded);
        EXPECT_FALSE(plain.out.empty());
        EXPECT_EQ(normalize_addresses(preloaded.out), normalize_addresses(plain.out))
            << "the program printed other results under memguard";
        return preloaded;
    }

    /// Loads the report of a run, expecting it complete, of format minor 1 or later and without
    /// reader warnings.
    std::optional<memguard::report::Report> load_clean(const ChildResult& result) {
        auto r = load(report_for(result.pid));
        if (!r) return r;
        EXPECT_TRUE(r->complete);
        EXPECT_GE(r->format_minor, 1);
        EXPECT_TRUE(r->warnings.empty()) << "first warning: " << r->warnings.front();
        return r;
    }

    /// The lines memguard wrote on stderr.
    static std::vector<std::string> memguard_messages(const ChildResult& result) {
        return lines_starting_with(result.err, "memguard:");
    }
};

/// The one block of `size` (fails the test when there is not exactly one).
inline const memguard::report::Block* only_block(const memguard::report::Report& r, uint64_t size) {
    std::vector<size_t> found = blocks_of_size(r, size);
    EXPECT_EQ(found.size(), 1u) << "blocks of " << size << " bytes";
    return found.size() == 1 ? &r.blocks[found[0]] : nullptr;
}

/// The exec with this handle (the most recent G record of it), or null.
inline const memguard::report::GraphExec* find_exec(const memguard::report::Report& r, uint64_t exec) {
    const memguard::report::GraphExec* found = nullptr;
    for (const auto& e : r.execs) {
        if (e.exec == exec) found = &e;
    }
    return found;
}

/// The lifecycle records (types among `types`, e.g. "CcGLDK") in file order, each as its type
/// and the handle it is about: the stream (C), the graph (c, K; `-` when none), the exec (G, L,
/// D). Compared as a whole, this checks order and counts at once.
inline std::vector<std::string> lifecycle(const std::string& path, const std::string& types) {
    std::vector<std::string> out;
    for (const auto& f : raw_records(path, types)) {
        char type = f[0][0];
        std::string what = type == 'C' ? f[4] : type == 'c' ? f[5] : f[3];
        out.push_back(f[0] + " " + what);
    }
    return out;
}

/// The log's handle `key` (info key 0x...) as the report writes handles: hex without 0x.
inline std::string handle_text(const AppLog& log, const std::string& key) { return hex(log.value(key)).substr(2); }

}  // namespace preload_test

// The environment: bad values warn once and change nothing else, unusable output paths leave the
// program running without a report, the output name template, and a setuid program, where the
// environment is not read at all.
#include "preload_fixture.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>

namespace preload_test {
namespace {

using namespace app_sizes;

class Environment : public PreloadTest {
protected:
    void SetUp() override {
        PreloadTest::SetUp();
        if (HasFatalFailure()) return;
        plain_ = run("alloc_kinds", {}, plain_env());
        ASSERT_EQ(plain_.exit_code, 0) << describe(plain_);
    }

    /// Runs alloc_kinds with `env` and expects: exit code and stdout as without memguard, and
    /// exactly one stderr line naming `variable`, which starts with "memguard:".
    ChildResult expect_one_warning(const Env& env, const std::string& variable) {
        ChildResult result = run("alloc_kinds", {}, env);
        EXPECT_EQ(result.exit_code, plain_.exit_code) << describe(result);
        EXPECT_EQ(normalize_addresses(result.out), normalize_addresses(plain_.out));
        std::vector<std::string> naming = lines_containing(result.err, variable);
        EXPECT_EQ(naming.size(), 1u) << "stderr lines naming " << variable << ":\n" << result.err;
        for (const std::string& line : naming) {
            EXPECT_EQ(line.rfind("memguard:", 0), 0u) << "does not start with memguard: " << line;
        }
        return result;
    }

    ChildResult plain_;
};

struct BadValue {
    const char* variable;
    const char* value;
};

// Names the case in gtest's messages.
void PrintTo(const BadValue& value, std::ostream* out) { *out << value.variable << "=" << value.value; }

class BadValues : public Environment, public ::testing::WithParamInterface<BadValue> {};

TEST_P(BadValues, WarnOnceAndChangeNothingElse) {
    Env env = preload_env();
    env[GetParam().variable] = GetParam().value;
    expect_one_warning(env, GetParam().variable);
}

INSTANTIATE_TEST_SUITE_P(Variables, BadValues,
                         ::testing::Values(BadValue{"MEMGUARD_ENABLE", "banana"},
                                           BadValue{"MEMGUARD_STACK_DEPTH", "-3"},
                                           BadValue{"MEMGUARD_LOG_LEVEL", "loud"}),
                         [](const ::testing::TestParamInfo<BadValue>& info) {
                             return std::string(info.param.variable);
                         });

/// Whether `text` is exactly one line: one '\n', at its end, and no other control character.
bool is_one_clean_line(const std::string& text) {
    if (text.empty() || text.back() != '\n') return false;
    for (size_t i = 0; i + 1 < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) return false;
    }
    return true;
}

// A value that holds a newline (or a terminal's escape sequences) is shown escaped, so that its
// warning stays one line and cannot pass for a line of the program's own (or clear the terminal);
// a huge value is cut. MEMGUARD_OUTPUT's reaches the warning through the path made from it.
TEST_F(Environment, ControlCharactersInAValueAreEscapedInItsOneWarningLine) {
    const struct {
        const char* variable;
        std::string value;
        std::string shown;  // in the warning
    } cases[] = {
        {"MEMGUARD_LOG_LEVEL", "loud\nmemguard: error: a forged line", "'loud\\nmemguard: error: a forged line'"},
        {"MEMGUARD_STACK_DEPTH", "\x1b[2J\x1b[H\r7\a", "'\\x1b[2J\\x1b[H\\r7\\x07'"},
        {"MEMGUARD_OUTPUT", reports_ + "/missing\n/%p.mgr", "/missing\\n/"},
        {"MEMGUARD_ENABLE", std::string(100000, 'y'), "... (100000 bytes)"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.variable);
        Env env = preload_env();
        env[c.variable] = c.value;
        ChildResult result = expect_one_warning(env, c.variable);
        EXPECT_TRUE(is_one_clean_line(result.err)) << "stderr is not one line:\n" << result.err;
        EXPECT_NE(result.err.find(c.shown), std::string::npos) << result.err;
        EXPECT_LT(result.err.size(), 600u) << "the warning echoes the whole value";
        for (const std::string& report : find_reports(dir_->path())) unlink(report.c_str());
    }
}

TEST_F(Environment, OutputInAMissingDirectoryRunsOnWithoutReport) {
    std::string missing = *dir_ / "missing";
    Env env = plain_env();
    env["LD_PRELOAD"] = Paths::memguard_lib();
    env["MEMGUARD_OUTPUT"] = missing + "/sub/%p.mgr";
    expect_one_warning(env, "MEMGUARD_OUTPUT");
    EXPECT_FALSE(exists(missing)) << "memguard created the missing directory";
    EXPECT_TRUE(find_reports(dir_->path()).empty());
}

TEST_F(Environment, OutputInAnUnwritableDirectoryRunsOnWithoutReport) {
    // Root writes into a mode 0555 directory anyway; sysfs refuses new files even to root.
    std::string unwritable = reports_ + "/locked";
    if (geteuid() == 0) {
        unwritable = "/sys";
    } else {
        make_dir(unwritable, 0555);
    }
    Env env = preload_env();
    env["MEMGUARD_OUTPUT"] = unwritable + "/memguard-test-%p.mgr";
    ChildResult result = expect_one_warning(env, "MEMGUARD_OUTPUT");
    EXPECT_FALSE(exists(unwritable + "/memguard-test-" + std::to_string(result.pid) + ".mgr"));
    EXPECT_TRUE(find_reports(dir_->path()).empty());
}

/// Names in /dev that start with "null." (an older memguard left /dev/null.1, .2, ...).
std::vector<std::string> numbered_dev_null() {
    std::vector<std::string> names;
    for (const std::string& name : list_dir("/dev")) {
        if (name.rfind("null.", 0) == 0) names.push_back(name);
    }
    return names;
}

// A name that a device, FIFO or socket has was meant for something else: no report, and no
// numbered file beside it (MEMGUARD_OUTPUT=/dev/null wrote /dev/null.1; as root, among the
// device nodes). The FIFO is never opened, so nothing blocks.
TEST_F(Environment, OutputNamingADeviceOrAFifoRunsOnWithoutReport) {
    const std::vector<std::string> before = numbered_dev_null();
    const std::string fifo = reports_ + "/fifo.mgr";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    for (const std::string& output : {std::string("/dev/null"), fifo}) {
        SCOPED_TRACE(output);
        Env env = preload_env();
        env["MEMGUARD_OUTPUT"] = output;
        ChildResult result = expect_one_warning(env, "MEMGUARD_OUTPUT");
        EXPECT_NE(result.err.find(output == fifo ? "is a FIFO" : "is a character device"), std::string::npos)
            << result.err;
    }
    EXPECT_EQ(numbered_dev_null(), before) << "memguard created a file beside /dev/null";
    EXPECT_EQ(list_dir(reports_), std::vector<std::string>{"fifo.mgr"});
    EXPECT_TRUE(list_dir(work_).empty());
}

/// Links planted at the output path: one to a file someone cares about, one dangling, to where
/// memguard would create a file for the planter.
class PlantedSymlink : public Environment {
protected:
    struct Plant {
        std::string target;
        std::string link;
    };

    void SetUp() override {
        Environment::SetUp();
        if (HasFatalFailure()) return;
        precious_ = *dir_ / "precious";
        elsewhere_ = *dir_ / "elsewhere.mgr";
        write_file(precious_, "do not touch\n");
        plants_ = {{precious_, reports_ + "/to-file.mgr"}, {elsewhere_, reports_ + "/dangling.mgr"}};
        for (const Plant& plant : plants_) {
            ASSERT_EQ(symlink(plant.target.c_str(), plant.link.c_str()), 0);
        }
    }

    /// Runs alloc_kinds with MEMGUARD_OUTPUT at the link.
    ChildResult run_at(const Plant& plant) {
        ChildResult result = run("alloc_kinds", {}, preload_env(base_name(plant.link)));
        EXPECT_EQ(result.exit_code, plain_.exit_code) << describe(result);
        EXPECT_EQ(normalize_addresses(result.out), normalize_addresses(plain_.out));
        return result;
    }

    std::string precious_, elsewhere_;
    std::vector<Plant> plants_;
};

TEST_F(PlantedSymlink, IsNeitherFollowedNorReplaced) {
    for (const Plant& plant : plants_) {
        SCOPED_TRACE(plant.link + " -> " + plant.target);
        run_at(plant);
        EXPECT_EQ(read_file(precious_), "do not touch\n");
        EXPECT_FALSE(exists(elsewhere_)) << "memguard created the symlink's target";
        struct stat st;
        ASSERT_EQ(lstat(plant.link.c_str(), &st), 0);
        EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the planted link was replaced";
    }
}

TEST_F(PlantedSymlink, WarnsOnceAndWritesNoReport) {
    for (const Plant& plant : plants_) {
        SCOPED_TRACE(plant.link + " -> " + plant.target);
        ChildResult result = run_at(plant);
        std::vector<std::string> naming = lines_containing(result.err, "MEMGUARD_OUTPUT");
        EXPECT_EQ(naming.size(), 1u) << "stderr lines naming MEMGUARD_OUTPUT:\n" << result.err;
        for (const std::string& line : naming) {
            EXPECT_EQ(line.rfind("memguard:", 0), 0u) << "does not start with memguard: " << line;
        }
        EXPECT_EQ(find_reports(dir_->path()), std::vector<std::string>{}) << "a report was written anyway";
        for (const std::string& report : find_reports(dir_->path())) unlink(report.c_str());
    }
}

// ---- file names ---------------------------------------------------------------------------------

class OutputName : public PreloadTest {
protected:
    ChildResult run_ok(const Env& env) {
        ChildResult result = run("exit_code", {}, env);
        EXPECT_EQ(result.exit_code, k_exit_code) << describe(result);
        return result;
    }
};

TEST_F(OutputName, DefaultIsExeAndPidInTheWorkingDirectory) {
    Env env = preload_env();
    env.erase("MEMGUARD_OUTPUT");
    ChildResult result = run_ok(env);
    std::string name = "memguard." + base_name(Paths::app("exit_code")) + "." + std::to_string(result.pid) + ".mgr";
    EXPECT_EQ(list_dir(work_), std::vector<std::string>{name});
    auto r = load(work_ + "/" + name);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->complete);
}

TEST_F(OutputName, TemplateExpandsPidHostRankAndPercent) {
    char host[256] = {};
    ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
    struct Case {
        Env extra;
        std::string rank;
    };
    const Case cases[] = {
        {{{"RANK", "3"}}, "3"},
        {{{"LOCAL_RANK", "5"}}, "5"},
        {{{"RANK", "2"}, {"LOCAL_RANK", "6"}}, "2"},
        {{}, "0"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE("rank " + c.rank);
        Env env = preload_env("r%r-%h-%p-%%.mgr");
        env.insert(c.extra.begin(), c.extra.end());
        ChildResult result = run_ok(env);
        std::string name = "r" + c.rank + "-" + host + "-" + std::to_string(result.pid) + "-%.mgr";
        EXPECT_TRUE(exists(reports_ + "/" + name)) << "files: " << ::testing::PrintToString(list_dir(reports_));
        auto r = exists(reports_ + "/" + name) ? load(reports_ + "/" + name) : std::nullopt;
        if (r) {
            EXPECT_EQ(r->info["rank"], c.rank);
            EXPECT_EQ(r->info["host"], host);
        }
        for (const std::string& file : list_dir(reports_)) unlink((reports_ + "/" + file).c_str());
    }
}

// An existing directory, or a name ending in '/', gets the default name inside. `.` used to
// become the file `..1` in the working directory.
TEST_F(OutputName, ADirectoryGetsTheDefaultNameInside) {
    const std::string exe = base_name(Paths::app("exit_code"));
    const auto default_name = [&](const ChildResult& r) {
        return "memguard." + exe + "." + std::to_string(r.pid) + ".mgr";
    };
    struct Case {
        std::string output;
        std::string dir;  // where the report must be
    };
    make_dir(reports_ + "/new");
    const Case cases[] = {{reports_, reports_}, {reports_ + "/new/", reports_ + "/new"}, {".", work_}, {"./", work_}};
    for (const Case& c : cases) {
        SCOPED_TRACE("MEMGUARD_OUTPUT=" + c.output);
        Env env = preload_env();
        env["MEMGUARD_OUTPUT"] = c.output;
        ChildResult result = run_ok(env);
        EXPECT_TRUE(result.err.empty()) << result.err;
        const std::string name = default_name(result);
        EXPECT_TRUE(exists(c.dir + "/" + name)) << "files: " << ::testing::PrintToString(list_dir(c.dir));
        if (exists(c.dir + "/" + name)) {
            auto r = load(c.dir + "/" + name);
            ASSERT_TRUE(r);
            EXPECT_TRUE(r->complete);
            unlink((c.dir + "/" + name).c_str());
        }
        EXPECT_TRUE(list_dir(work_).empty()) << ::testing::PrintToString(list_dir(work_));
        EXPECT_EQ(list_dir(reports_), std::vector<std::string>{"new"});
        EXPECT_TRUE(list_dir(reports_ + "/new").empty());
        EXPECT_EQ(list_dir(dir_->path()), (std::vector<std::string>{"reports", "work"}));
    }
}

// A symbolic link to a directory is refused like any link at the output path; `link/` names the
// directory itself (as a directory earlier in the path, the link is followed).
TEST_F(OutputName, ALinkToADirectoryIsRefusedUnlessTheNameEndsInASlash) {
    make_dir(reports_ + "/dir");
    ASSERT_EQ(symlink((reports_ + "/dir").c_str(), (reports_ + "/link").c_str()), 0);
    ChildResult linked = run_ok(preload_env("link"));
    EXPECT_EQ(lines_containing(linked.err, "a symbolic link is in the way").size(), 1u) << linked.err;
    EXPECT_TRUE(list_dir(reports_ + "/dir").empty());
    ChildResult through = run_ok(preload_env("link/"));
    const std::string name = "memguard." + base_name(Paths::app("exit_code")) + "." + std::to_string(through.pid) +
                             ".mgr";
    EXPECT_EQ(list_dir(reports_ + "/dir"), std::vector<std::string>{name});
    EXPECT_EQ(list_dir(reports_), (std::vector<std::string>{"dir", "link"}));
}

TEST_F(OutputName, ExistingNameGetsANumberedSuffix) {
    std::string taken = reports_ + "/run.mgr";
    write_file(taken, "someone else's file\n");
    Env env = preload_env("run.mgr");
    run_ok(env);
    run_ok(env);
    EXPECT_EQ(read_file(taken), "someone else's file\n");
    EXPECT_EQ(list_dir(reports_), (std::vector<std::string>{"run.mgr", "run.mgr.1", "run.mgr.2"}));
    for (const char* name : {"run.mgr.1", "run.mgr.2"}) {
        if (!exists(reports_ + "/" + name)) continue;
        auto r = load(reports_ + "/" + name);
        ASSERT_TRUE(r);
        EXPECT_TRUE(r->complete);
    }
}

// ---- secure execution ---------------------------------------------------------------------------

/// A setuid-root program run by an unprivileged user is a secure-execution process (AT_SECURE):
/// its environment is the user's, and memguard must not let it choose where root creates a file,
/// nor read it at all. secure_alloc, copied and made setuid root, runs as nobody through as_user;
/// it loads libmemguard.so itself (the loader ignores LD_PRELOAD paths there) and allocates through
/// memguard's cudaMalloc.
class SecureExecution : public PreloadTest {
protected:
    static constexpr uid_t kNobody = 65534;

    void SetUp() override {
        PreloadTest::SetUp();
        if (HasFatalFailure()) return;
        if (geteuid() != 0) GTEST_SKIP() << "needs root: the test makes a setuid-root program";
        struct statvfs fs;
        ASSERT_EQ(statvfs(dir_->path().c_str(), &fs), 0);
        if (fs.f_flag & ST_NOSUID) GTEST_SKIP() << dir_->path() << " is on a file system mounted nosuid";
        // nobody must reach the program and the working directory (root-owned, 0755).
        ASSERT_EQ(chmod(dir_->path().c_str(), 0755), 0);
        for (std::string d = dir_->path(); !d.empty(); d = d.substr(0, d.rfind('/'))) {
            struct stat st;
            ASSERT_EQ(stat(d.c_str(), &st), 0) << d;
            if (!(st.st_mode & S_IXOTH)) GTEST_SKIP() << d << " is not searchable by other users (set TMPDIR)";
        }
        program_ = *dir_ / "secure_alloc";
        std::ifstream in(APP_SECURE_ALLOC, std::ios::binary);
        std::ofstream out(program_, std::ios::binary);
        out << in.rdbuf();
        out.close();
        ASSERT_TRUE(in && out) << "cannot copy " << APP_SECURE_ALLOC;
        ASSERT_EQ(chown(program_.c_str(), 0, 0), 0);
        ASSERT_EQ(chmod(program_.c_str(), 04755), 0);
    }

    /// Runs the setuid copy as nobody, loading `library` ("-": none).
    ChildResult run_as_nobody(const std::string& library, const Env& env) {
        ChildOptions o;
        o.argv = {APP_AS_USER, std::to_string(kNobody), std::to_string(kNobody), program_, library};
        o.env = env;
        o.cwd = work_;
        return run_child(o);
    }

    std::string program_;
};

TEST_F(SecureExecution, MemguardReadsNothingAndCreatesNoFile) {
    Env env = plain_env();
    env["MEMGUARD_OUTPUT"] = reports_ + "/%p.mgr";  // where the user would have root write
    env["MEMGUARD_LOG_LEVEL"] = "info";             // an active memguard would say where it writes
    env["MEMGUARD_STACK_DEPTH"] = "bad\nvalue";     // and warn
    ChildResult without = run_as_nobody("-", env);
    ChildResult with = run_as_nobody(Paths::memguard_lib(), env);
    ASSERT_EQ(without.exit_code, 0) << describe(without);
    if (lines_starting_with(without.out, "info at_secure 1").empty() ||
        lines_starting_with(without.out, "info euid 0").empty()) {
        GTEST_SKIP() << "the setuid bit did not take effect (no_new_privs?):\n" << without.out;
    }
    EXPECT_EQ(with.exit_code, without.exit_code) << describe(with);
    EXPECT_EQ(normalize_addresses(with.out), normalize_addresses(without.out));
    EXPECT_EQ(with.err, without.err);
    EXPECT_EQ(lines_starting_with(with.out, "info nvtx_env unset").size(), 1u) << with.out;
    EXPECT_TRUE(list_dir(reports_).empty()) << ::testing::PrintToString(list_dir(reports_));
    EXPECT_TRUE(list_dir(work_).empty()) << ::testing::PrintToString(list_dir(work_));
    EXPECT_TRUE(find_reports(dir_->path()).empty());

    // Without the setuid bit, the same run as nobody is recorded: the test can tell.
    ASSERT_EQ(chmod(program_.c_str(), 0755), 0);
    const std::string own = *dir_ / "nobody";
    make_dir(own);
    ASSERT_EQ(chown(own.c_str(), kNobody, kNobody), 0);
    env["MEMGUARD_OUTPUT"] = own + "/%p.mgr";
    ChildResult plain = run_as_nobody(Paths::memguard_lib(), env);
    EXPECT_EQ(plain.exit_code, 0) << describe(plain);
    EXPECT_EQ(lines_starting_with(plain.out, "info at_secure 0").size(), 1u) << plain.out;
    EXPECT_EQ(list_dir(own), std::vector<std::string>{std::to_string(plain.pid) + ".mgr"})
        << "an unprivileged run wrote no report:\n"
        << describe(plain);
}

}  // namespace
}  // namespace preload_test

// The environment: bad values warn once and change nothing else, unusable output paths leave the
// program running without a report, and the output name template.
#include "preload_fixture.h"

#include <sys/stat.h>
#include <unistd.h>

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
void PrintTo(const BadValue& value, std::ostream* out) {
    *out << value.variable << "=" << value.value;
}

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
        EXPECT_EQ(find_reports(dir_->path()), std::vector<std::string>{})
            << "a report was written anyway";
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
    std::string name = "memguard." + base_name(Paths::app("exit_code")) + "." +
                       std::to_string(result.pid) + ".mgr";
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

}  // namespace
}  // namespace preload_test

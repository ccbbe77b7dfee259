// The fixture of the preload tests: every test gets its own temporary directory with a reports/
// directory (where MEMGUARD_OUTPUT points) and a work/ directory (the child's working directory),
// and runs the test applications with an exact environment.
#pragma once

#include "app_sizes.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace preload_test {

using Env = std::map<std::string, std::string>;

class PreloadTest : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string label = std::string(info->test_suite_name()) + "." + info->name();
        for (char& c : label) {
            if (c == '/') c = '_';
        }
        dir_ = std::make_unique<TempDir>(label);
        reports_ = *dir_ / "reports";
        work_ = *dir_ / "work";
        make_dir(reports_);
        make_dir(work_);
    }

    void TearDown() override {
        if (HasFailure()) {
            dir_->keep();
            std::cerr << "[ kept     ] " << dir_->path() << "\n";
        }
    }

    /// The environment of a run without memguard: nothing is inherited from the test.
    Env plain_env() const { return {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}, {"HOME", dir_->path()}}; }

    /// plain_env() plus LD_PRELOAD of libmemguard.so and MEMGUARD_OUTPUT=reports/<output_name>.
    Env preload_env(const std::string& output_name = "%p.mgr") const {
        Env env = plain_env();
        env["LD_PRELOAD"] = Paths::memguard_lib();
        env["MEMGUARD_OUTPUT"] = reports_ + "/" + output_name;
        return env;
    }

    ChildOptions options(const std::string& app, const std::vector<std::string>& args, const Env& env) const {
        ChildOptions o;
        o.argv.push_back(Paths::app(app));
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.env = env;
        o.cwd = work_;
        return o;
    }

    ChildResult run(const std::string& app, const std::vector<std::string>& args, const Env& env) {
        return run_child(options(app, args, env));
    }

    std::string report_for(pid_t pid) const { return reports_ + "/" + std::to_string(pid) + ".mgr"; }

    /// Loads a report; records a test failure (and returns nothing) when the reader refuses it.
    static std::optional<memguard::report::Report> load(const std::string& path) {
        try {
            return memguard::report::load_report(path);
        } catch (const std::exception& error) {
            ADD_FAILURE() << "load_report(" << path << ") failed: " << error.what();
            return std::nullopt;
        }
    }

    /// How a run ended and what it wrote to stderr, for failure messages.
    static std::string describe(const ChildResult& r) {
        std::string text = "pid " + std::to_string(r.pid) + ", ";
        text += r.term_signal != 0 ? "killed by signal " + std::to_string(r.term_signal)
                                   : "exit code " + std::to_string(r.exit_code);
        if (r.timed_out) text += " (timed out)";
        text += "\n--- stderr ---\n" + r.err + "--------------";
        return text;
    }

    std::unique_ptr<TempDir> dir_;
    std::string reports_, work_;
};

}  // namespace preload_test

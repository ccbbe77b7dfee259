#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/config.h"

using memguard::AllocatorMode;
using memguard::Config;
using memguard::ConfigResult;
using memguard::LogLevel;

namespace {
ConfigResult parse(const std::map<std::string, std::string>& env) {
    return memguard::parse_config([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}
}  // namespace

TEST(Config, DefaultsWithEmptyEnvironment) {
    ConfigResult r = parse({});
    EXPECT_TRUE(r.problems.empty());
    EXPECT_TRUE(r.config.enabled);
    EXPECT_EQ(r.config.stack_depth, 64);
    EXPECT_EQ(r.config.log_level, LogLevel::Warn);
    EXPECT_TRUE(r.config.output_template.empty());
}

TEST(Config, AcceptsValidValues) {
    ConfigResult r = parse({{"MEMGUARD_ENABLE", "0"},
                            {"MEMGUARD_STACK_DEPTH", "12"},
                            {"MEMGUARD_LOG_LEVEL", "DEBUG"},
                            {"MEMGUARD_OUTPUT", "/tmp/run.%r.%p.%h.mgr"}});
    EXPECT_TRUE(r.problems.empty());
    EXPECT_FALSE(r.config.enabled);
    EXPECT_EQ(r.config.stack_depth, 12);
    EXPECT_EQ(r.config.log_level, LogLevel::Debug);
    EXPECT_EQ(r.config.output_template, "/tmp/run.%r.%p.%h.mgr");
}

TEST(Config, EnableSpellings) {
    for (const char* on : {"1", "true", "YES", "on"}) EXPECT_TRUE(parse({{"MEMGUARD_ENABLE", on}}).config.enabled) << on;
    for (const char* off : {"0", "false", "No", "OFF"}) EXPECT_FALSE(parse({{"MEMGUARD_ENABLE", off}}).config.enabled) << off;
}

TEST(Config, StackDepthBounds) {
    EXPECT_EQ(parse({{"MEMGUARD_STACK_DEPTH", "0"}}).config.stack_depth, 0);
    EXPECT_EQ(parse({{"MEMGUARD_STACK_DEPTH", "256"}}).config.stack_depth, 256);
    for (const char* bad : {"257", "-3", "", "12x", "99999999999999999999"}) {
        ConfigResult r = parse({{"MEMGUARD_STACK_DEPTH", bad}});
        ASSERT_EQ(r.problems.size(), 1u) << bad;
        EXPECT_EQ(r.config.stack_depth, 64) << bad;
        EXPECT_NE(r.problems[0].find("MEMGUARD_STACK_DEPTH"), std::string::npos);
        EXPECT_NE(r.problems[0].find("0 to 256"), std::string::npos);
    }
}

TEST(Config, EachBadValueGivesOneProblemNamingTheVariableAndKeepsTheDefault) {
    ConfigResult r = parse({{"MEMGUARD_ENABLE", "banana"},
                            {"MEMGUARD_LOG_LEVEL", "loud"},
                            {"MEMGUARD_OUTPUT", "/tmp/x.%q"}});
    ASSERT_EQ(r.problems.size(), 3u);
    EXPECT_NE(r.problems[0].find("MEMGUARD_LOG_LEVEL='loud'"), std::string::npos);
    EXPECT_NE(r.problems[1].find("MEMGUARD_ENABLE='banana'"), std::string::npos);
    EXPECT_NE(r.problems[2].find("MEMGUARD_OUTPUT='/tmp/x.%q'"), std::string::npos);
    EXPECT_TRUE(r.config.enabled);
    EXPECT_EQ(r.config.log_level, LogLevel::Warn);
    EXPECT_TRUE(r.config.output_template.empty());
    for (const auto& p : r.problems) EXPECT_EQ(p.find('\n'), std::string::npos);
}

TEST(Config, EmptyOutputIsAProblem) {
    ConfigResult r = parse({{"MEMGUARD_OUTPUT", ""}});
    ASSERT_EQ(r.problems.size(), 1u);
    EXPECT_TRUE(r.config.output_template.empty());
}

TEST(Config, PythonSwitchesDefaultOnAndTurnOff) {
    ConfigResult d = parse({});
    EXPECT_TRUE(d.config.collect_compile_garbage);
    EXPECT_TRUE(d.config.python_stacks);
    EXPECT_TRUE(d.config.compile_window);
    ConfigResult r = parse({{"MEMGUARD_COLLECT_COMPILE_GARBAGE", "0"},
                            {"MEMGUARD_PYTHON_STACKS", "off"},
                            {"MEMGUARD_COMPILE_WINDOW", "false"}});
    EXPECT_TRUE(r.problems.empty());
    EXPECT_FALSE(r.config.collect_compile_garbage);
    EXPECT_FALSE(r.config.python_stacks);
    EXPECT_FALSE(r.config.compile_window);
    ConfigResult bad = parse({{"MEMGUARD_COMPILE_WINDOW", "maybe"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_NE(bad.problems[0].find("MEMGUARD_COMPILE_WINDOW='maybe'"), std::string::npos);
    EXPECT_TRUE(bad.config.compile_window);
}

/// A boolean switch: `field` is `default_value` when `var` is unset, flips with `flip` (no problem),
/// and a bad value gives one problem naming it and keeps the default.
static void expect_switch(const char* var, bool Config::*field, bool default_value, const char* flip, const char* bad_value) {
    EXPECT_EQ(parse({}).config.*field, default_value);
    ConfigResult flipped = parse({{var, flip}});
    EXPECT_TRUE(flipped.problems.empty());
    EXPECT_EQ(flipped.config.*field, !default_value);
    ConfigResult bad = parse({{var, bad_value}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_NE(bad.problems[0].find(std::string(var) + "='" + bad_value + "'"), std::string::npos);
    EXPECT_EQ(bad.config.*field, default_value);
}

TEST(Config, NativeBelowPythonDefaultsOffAndTurnsOn) {
    expect_switch("MEMGUARD_NATIVE_BELOW_PYTHON", &Config::native_below_python, false, "1", "deep");
}

TEST(Config, NvtxSwitchDefaultsOnAndTurnsOff) { expect_switch("MEMGUARD_NVTX", &Config::nvtx, true, "0", "sometimes"); }

TEST(Config, AllocatorModeDefaultsToNativeAndRejectsUnknownValues) {
    EXPECT_EQ(parse({}).config.allocator, AllocatorMode::Native);
    ConfigResult mg = parse({{"MEMGUARD_ALLOCATOR", "memguard"}});
    EXPECT_TRUE(mg.problems.empty());
    EXPECT_EQ(mg.config.allocator, AllocatorMode::Memguard);
    EXPECT_EQ(parse({{"MEMGUARD_ALLOCATOR", "Native"}}).config.allocator, AllocatorMode::Native);
    ConfigResult bad = parse({{"MEMGUARD_ALLOCATOR", "cudaMallocAsync"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_NE(bad.problems[0].find("MEMGUARD_ALLOCATOR='cudaMallocAsync'"), std::string::npos);
    EXPECT_NE(bad.problems[0].find("keeping native"), std::string::npos);
    EXPECT_EQ(bad.config.allocator, AllocatorMode::Native);
}

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/config.h"

using memguard::AllocatorMode;
using memguard::Config;
using memguard::ConfigResult;
using memguard::CyclesConfig;
using memguard::ExplainCycles;
using memguard::LogLevel;
using memguard::ReportEncoding;

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
    for (const char* on : {"1", "true", "YES", "on"})
        EXPECT_TRUE(parse({{"MEMGUARD_ENABLE", on}}).config.enabled) << on;
    for (const char* off : {"0", "false", "No", "OFF"})
        EXPECT_FALSE(parse({{"MEMGUARD_ENABLE", off}}).config.enabled) << off;
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
    ConfigResult r = parse(
        {{"MEMGUARD_ENABLE", "banana"}, {"MEMGUARD_LOG_LEVEL", "loud"}, {"MEMGUARD_OUTPUT", "/tmp/x.%q"}});
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
static void expect_switch(const char* var, bool Config::*field, bool default_value, const char* flip,
                          const char* bad_value) {
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
    expect_switch("MEMGUARD_STACK_MEMO", &Config::stack_memo, true, "0", "sometimes");
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

TEST(Config, ReportEncodingDefaultsToBinaryAndRejectsUnknownValues) {
    EXPECT_EQ(parse({}).config.report_encoding, ReportEncoding::Binary);
    ConfigResult text = parse({{"MEMGUARD_REPORT_ENCODING", "text"}});
    EXPECT_TRUE(text.problems.empty());
    EXPECT_EQ(text.config.report_encoding, ReportEncoding::Text);
    EXPECT_EQ(parse({{"MEMGUARD_REPORT_ENCODING", "Binary"}}).config.report_encoding, ReportEncoding::Binary);
    ConfigResult bad = parse({{"MEMGUARD_REPORT_ENCODING", "json"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_EQ(bad.problems[0], "MEMGUARD_REPORT_ENCODING='json' is not valid: expected binary (compact records) or "
                               "text (a line per record); keeping binary");
    EXPECT_EQ(bad.config.report_encoding, ReportEncoding::Binary);
    // What memguard run says of a bad --report-encoding, without what the library keeps.
    EXPECT_EQ(memguard::config_value_problem("MEMGUARD_REPORT_ENCODING", "json"),
              "MEMGUARD_REPORT_ENCODING='json' is not valid: expected binary (compact records) or text (a line per "
              "record)");
    EXPECT_EQ(memguard::config_value_problem("MEMGUARD_REPORT_ENCODING", "text"), "");
}

TEST(Config, MaxReportSizeTakesSizesAsTheCliDoesAndRefusesTinyOnes) {
    EXPECT_EQ(parse({}).config.max_report_size, 0u);
    EXPECT_EQ(parse({{"MEMGUARD_MAX_REPORT_SIZE", "2GiB"}}).config.max_report_size, uint64_t{2} << 30);
    EXPECT_EQ(parse({{"MEMGUARD_MAX_REPORT_SIZE", "1.5 gb"}}).config.max_report_size, 1500000000u);
    EXPECT_EQ(parse({{"MEMGUARD_MAX_REPORT_SIZE", "0"}}).config.max_report_size, 0u);
    EXPECT_TRUE(parse({{"MEMGUARD_MAX_REPORT_SIZE", "1MiB"}}).problems.empty());
    ConfigResult tiny = parse({{"MEMGUARD_MAX_REPORT_SIZE", "100KiB"}});
    ASSERT_EQ(tiny.problems.size(), 1u);
    EXPECT_EQ(tiny.problems[0], "MEMGUARD_MAX_REPORT_SIZE='100KiB' is not valid: below the smallest limit, 1MiB "
                                "(expected a size such as 2GiB, or 0 for none); keeping no limit");
    EXPECT_EQ(tiny.config.max_report_size, 0u);
    ConfigResult bad = parse({{"MEMGUARD_MAX_REPORT_SIZE", "2 parsecs"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_EQ(bad.problems[0].rfind("MEMGUARD_MAX_REPORT_SIZE='2 parsecs' is not valid: ", 0), 0u) << bad.problems[0];
    EXPECT_NE(bad.problems[0].find("keeping no limit"), std::string::npos);
    EXPECT_EQ(bad.config.max_report_size, 0u);
}

TEST(Config, FoldIsASwitchAndTheCliAnAbsolutePath) {
    EXPECT_TRUE(parse({}).config.fold);
    EXPECT_EQ(parse({}).config.cli, "");
    EXPECT_FALSE(parse({{"MEMGUARD_FOLD", "0"}}).config.fold);
    EXPECT_FALSE(parse({{"MEMGUARD_FOLD", "off"}}).config.fold);
    ConfigResult bad = parse({{"MEMGUARD_FOLD", "later"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_EQ(bad.problems[0], "MEMGUARD_FOLD='later' is not valid: expected 1 or 0 (also true/false, yes/no, "
                               "on/off); keeping 1");
    EXPECT_TRUE(bad.config.fold);
    EXPECT_EQ(parse({{"MEMGUARD_CLI", "/opt/mg/bin/memguard"}}).config.cli, "/opt/mg/bin/memguard");
    ConfigResult relative = parse({{"MEMGUARD_CLI", "memguard"}});
    ASSERT_EQ(relative.problems.size(), 1u);
    EXPECT_EQ(relative.problems[0], "MEMGUARD_CLI='memguard' is not valid: expected the absolute path of the "
                                    "memguard program; keeping the one beside the library");
    EXPECT_EQ(relative.config.cli, "");
}

TEST(Config, RunIdFromMemguardRunIdElseTorchelastic) {
    EXPECT_EQ(parse({}).config.run_id, "");
    EXPECT_EQ(parse({{"MEMGUARD_RUN_ID", "20250101-120000-1a2b3c4d"}}).config.run_id, "20250101-120000-1a2b3c4d");
    EXPECT_EQ(parse({{"TORCHELASTIC_RUN_ID", "9b1c-uuid"}}).config.run_id, "9b1c-uuid");
    // torchrun's default for a job without --rdzv-id: shared by every such job, so not an id.
    EXPECT_EQ(parse({{"TORCHELASTIC_RUN_ID", "none"}}).config.run_id, "");
    EXPECT_EQ(parse({{"TORCHELASTIC_RUN_ID", "has space"}}).config.run_id, "");
    EXPECT_TRUE(parse({{"TORCHELASTIC_RUN_ID", "has space"}}).problems.empty());  // torchrun's variable
    EXPECT_EQ(parse({{"MEMGUARD_RUN_ID", "mine"}, {"TORCHELASTIC_RUN_ID", "elastic"}}).config.run_id, "mine");
    ConfigResult bad = parse({{"MEMGUARD_RUN_ID", "a b"}, {"TORCHELASTIC_RUN_ID", "elastic"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_EQ(bad.problems[0], "MEMGUARD_RUN_ID='a b' is not valid: expected 1 to 128 printable ASCII characters "
                               "without spaces; keeping no run id");
    EXPECT_EQ(bad.config.run_id, "elastic");
    EXPECT_EQ(parse({{"MEMGUARD_RUN_ID", std::string(129, 'x')}}).problems.size(), 1u);
    EXPECT_EQ(parse({{"MEMGUARD_RUN_ID", std::string(128, 'x')}}).config.run_id, std::string(128, 'x'));
}

TEST(Config, RunManifestMustBeAbsolute) {
    EXPECT_EQ(parse({{"MEMGUARD_RUN_MANIFEST", "/tmp/memguard-run.x/reports"}}).config.run_manifest,
              "/tmp/memguard-run.x/reports");
    ConfigResult bad = parse({{"MEMGUARD_RUN_MANIFEST", "reports"}});
    ASSERT_EQ(bad.problems.size(), 1u);
    EXPECT_EQ(bad.config.run_manifest, "");
}

// The CLI's check of its options' values (memguard run): the library's words, less what it keeps.
TEST(Config, ValueProblemIsTheParsersWithoutTheFallback) {
    EXPECT_EQ(memguard::config_value_problem("MEMGUARD_STACK_DEPTH", "12"), "");
    EXPECT_EQ(memguard::config_value_problem("MEMGUARD_STACK_DEPTH", "x"),
              "MEMGUARD_STACK_DEPTH='x' is not valid: expected an integer from 0 to 256");
    EXPECT_EQ(memguard::config_value_problem("MEMGUARD_NVTX", "maybe"),
              "MEMGUARD_NVTX='maybe' is not valid: expected 1 or 0 (also true/false, yes/no, on/off)");
    EXPECT_EQ(memguard::config_value_problem("MEMGUARD_OUTPUT", ""),
              "MEMGUARD_OUTPUT is empty: expected a path template (%p pid, %h host, %r rank)");
}

// In a secure-execution process (AT_SECURE: setuid, setgid, capabilities) the environment is a
// less privileged user's: nothing is read from it, and memguard is off, NVTX injection included.
TEST(Config, SecureExecutionReadsNothingAndTurnsEverythingOff) {
    const std::map<std::string, std::string> env = {{"MEMGUARD_OUTPUT", "/etc/owned.%p"},
                                                    {"MEMGUARD_ENABLE", "1"},
                                                    {"MEMGUARD_LOG_LEVEL", "bogus"}};
    std::vector<std::string> asked;
    auto lookup = [&](const char* name) -> const char* {
        asked.push_back(name);
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    ConfigResult secure = memguard::startup_config(1, lookup);
    EXPECT_TRUE(asked.empty()) << "read " << asked.size() << " variables, the first " << asked.front();
    EXPECT_TRUE(secure.problems.empty());
    EXPECT_FALSE(secure.config.enabled);
    EXPECT_FALSE(secure.config.nvtx);
    EXPECT_TRUE(secure.config.output_template.empty());
    EXPECT_TRUE(secure.config.run_manifest.empty());  // never a file of that user's choice

    // Any other process: the environment, as parse_config reads it.
    ConfigResult normal = memguard::startup_config(0, lookup);
    EXPECT_FALSE(asked.empty());
    EXPECT_TRUE(normal.config.enabled);
    EXPECT_EQ(normal.config.output_template, "/etc/owned.%p");
    EXPECT_EQ(normal.problems.size(), 1u);
}

// A value is echoed on one line, with nothing a terminal would act on, and cut when long.
TEST(Config, EchoedValuesEscapeControlCharactersAndInvalidUtf8) {
    using memguard::echo_value;
    EXPECT_EQ(echo_value("plain/path %p.mgr"), "plain/path %p.mgr");
    EXPECT_EQ(echo_value("a\nb\rc\td"), "a\\nb\\rc\\td");
    EXPECT_EQ(echo_value("\x1b[2J\a\x7f"), "\\x1b[2J\\x07\\x7f");
    EXPECT_EQ(echo_value("back\\slash"), "back\\\\slash");
    EXPECT_EQ(echo_value(std::string("nul\0byte", 8)), "nul\\x00byte");
    // UTF-8 stays (a path in anyone's language); broken sequences and C1 controls do not.
    EXPECT_EQ(echo_value("/home/jos\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80"),
              "/home/jos\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80");
    EXPECT_EQ(echo_value("\xff\xc3"), "\\xff\\xc3");
    EXPECT_EQ(echo_value("\xc2\x9b"
                         "2J"),
              "\\xc2\\x9b2J");                                                   // CSI as a C1 control
    EXPECT_EQ(echo_value("\xc0\xaf\xed\xa0\x80"), "\\xc0\\xaf\\xed\\xa0\\x80");  // overlong, surrogate
    EXPECT_EQ(echo_value("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");           // past U+10FFFF
}

TEST(Config, EchoedValuesAreCutAtTheLimit) {
    using memguard::echo_value;
    using memguard::kEchoLimit;
    EXPECT_EQ(echo_value(std::string(kEchoLimit, 'x')), std::string(kEchoLimit, 'x'));
    EXPECT_EQ(echo_value(std::string(kEchoLimit + 1, 'x')),
              std::string(kEchoLimit, 'x') + "... (" + std::to_string(kEchoLimit + 1) + " bytes)");
    const std::string escapes = echo_value(std::string(100000, '\n'));
    EXPECT_LE(escapes.size(), kEchoLimit + 30);
    EXPECT_NE(escapes.find("... (100000 bytes)"), std::string::npos);
}

// Every problem is one line that shows the value escaped and cut, whichever variable holds it.
TEST(Config, ProblemsShowTheValueOnOneLine) {
    const std::string forged = "loud\nmemguard: error: a forged line\x1b[2J";
    for (const char* var : {"MEMGUARD_LOG_LEVEL", "MEMGUARD_ENABLE", "MEMGUARD_STACK_DEPTH", "MEMGUARD_ALLOCATOR",
                            "MEMGUARD_PYTHON_STACKS", "MEMGUARD_REPORT_ENCODING"}) {
        ConfigResult r = parse({{var, forged}});
        ASSERT_EQ(r.problems.size(), 1u) << var;
        EXPECT_NE(r.problems[0].find("'loud\\nmemguard: error: a forged line\\x1b[2J'"), std::string::npos)
            << r.problems[0];
        for (char c : r.problems[0]) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << var;
    }
    ConfigResult output = parse({{"MEMGUARD_OUTPUT", "/tmp/%q\n"}});
    ASSERT_EQ(output.problems.size(), 1u);
    EXPECT_NE(output.problems[0].find("MEMGUARD_OUTPUT='/tmp/%q\\n'"), std::string::npos) << output.problems[0];
    ConfigResult huge = parse({{"MEMGUARD_LOG_LEVEL", std::string(1 << 20, 'z')}});
    ASSERT_EQ(huge.problems.size(), 1u);
    EXPECT_LT(huge.problems[0].size(), 400u);
}

TEST(Config, CyclesDefaults) {
    const CyclesConfig c = parse({}).config.cycles;
    EXPECT_TRUE(c.collect_recompute_garbage);
    EXPECT_STREQ(c.recompute_functions, "");
    EXPECT_EQ(c.gc_every_steps, 0);
    EXPECT_EQ(c.gc_generation, 2);
    EXPECT_DOUBLE_EQ(c.gc_budget, 0.01);
    EXPECT_EQ(c.explain, ExplainCycles::Memguard);
    EXPECT_EQ(c.explain_min_bytes, 1u << 20);
}

TEST(Config, CyclesValues) {
    ConfigResult r = parse({{"MEMGUARD_COLLECT_RECOMPUTE_GARBAGE", "0"},
                            {"MEMGUARD_RECOMPUTE_FUNCTIONS", "MyRecompute,megatron.core.random.CheckpointFunction"},
                            {"MEMGUARD_GC_EVERY_STEPS", "10"},
                            {"MEMGUARD_GC_GENERATION", "1"},
                            {"MEMGUARD_GC_BUDGET", "0.05"},
                            {"MEMGUARD_EXPLAIN_CYCLES", "all"},
                            {"MEMGUARD_EXPLAIN_MIN_BYTES", "64M"}});
    EXPECT_TRUE(r.problems.empty()) << r.problems.front();
    const CyclesConfig& c = r.config.cycles;
    EXPECT_FALSE(c.collect_recompute_garbage);
    EXPECT_STREQ(c.recompute_functions, "MyRecompute,megatron.core.random.CheckpointFunction");
    EXPECT_EQ(c.gc_every_steps, 10);
    EXPECT_EQ(c.gc_generation, 1);
    EXPECT_DOUBLE_EQ(c.gc_budget, 0.05);
    EXPECT_EQ(c.explain, ExplainCycles::All);
    EXPECT_EQ(c.explain_min_bytes, 64u << 20);
    EXPECT_EQ(parse({{"MEMGUARD_EXPLAIN_CYCLES", "0"}}).config.cycles.explain, ExplainCycles::Off);
    EXPECT_EQ(parse({{"MEMGUARD_EXPLAIN_CYCLES", "1"}}).config.cycles.explain, ExplainCycles::Memguard);
    EXPECT_EQ(parse({{"MEMGUARD_EXPLAIN_MIN_BYTES", "4096"}}).config.cycles.explain_min_bytes, 4096u);
}

TEST(Config, CyclesBadValuesKeepTheDefaults) {
    const std::pair<const char*, const char*> bad[] = {
        {"MEMGUARD_GC_EVERY_STEPS", "-1"},
        {"MEMGUARD_GC_EVERY_STEPS", "x"},
        {"MEMGUARD_GC_GENERATION", "3"},
        {"MEMGUARD_GC_BUDGET", "0"},
        {"MEMGUARD_GC_BUDGET", "1.5"},
        {"MEMGUARD_GC_BUDGET", "nan"},
        {"MEMGUARD_EXPLAIN_CYCLES", "some"},
        {"MEMGUARD_EXPLAIN_MIN_BYTES", "-5"},
        {"MEMGUARD_EXPLAIN_MIN_BYTES", "3T"},
        {"MEMGUARD_RECOMPUTE_FUNCTIONS", "a,,b"},
        {"MEMGUARD_RECOMPUTE_FUNCTIONS", "1abc"},
        {"MEMGUARD_RECOMPUTE_FUNCTIONS", "a b"},
        {"MEMGUARD_RECOMPUTE_FUNCTIONS", "mod."},
        {"MEMGUARD_COLLECT_RECOMPUTE_GARBAGE", "perhaps"},
    };
    const CyclesConfig defaults = parse({}).config.cycles;
    for (const auto& [var, value] : bad) {
        ConfigResult r = parse({{var, value}});
        ASSERT_EQ(r.problems.size(), 1u) << var << "=" << value;
        EXPECT_NE(r.problems[0].find(std::string(var) + "='" + value + "'"), std::string::npos) << r.problems[0];
        EXPECT_NE(r.problems[0].find("keeping"), std::string::npos) << r.problems[0];
        const CyclesConfig& c = r.config.cycles;
        EXPECT_EQ(c.gc_every_steps, defaults.gc_every_steps);
        EXPECT_EQ(c.gc_generation, defaults.gc_generation);
        EXPECT_DOUBLE_EQ(c.gc_budget, defaults.gc_budget);
        EXPECT_EQ(c.explain, defaults.explain);
        EXPECT_EQ(c.explain_min_bytes, defaults.explain_min_bytes);
        EXPECT_STREQ(c.recompute_functions, defaults.recompute_functions);
        EXPECT_EQ(c.collect_recompute_garbage, defaults.collect_recompute_garbage);
    }
    std::string long_list(CyclesConfig::kMaxRecomputeFunctions + 1, 'a');
    EXPECT_EQ(parse({{"MEMGUARD_RECOMPUTE_FUNCTIONS", long_list.c_str()}}).problems.size(), 1u);
}

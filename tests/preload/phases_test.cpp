// Phases and marks (report format minor 4): NVTX ranges and marks from three NVTX copies (two
// shared libraries and the program, tests/apps/nvtx_phases.cpp) and memguard's C API, recorded as
// B/b/J records around the program's allocations.
#include "preload_fixture.h"

#include "common/text.h"

#include <algorithm>
#include <set>

namespace preload_test {
namespace {

class Phases : public PreloadTest {};

struct Record {
    size_t index = 0;  // position among all records of the file
    std::vector<std::string> f;
    char type() const { return f[0][0]; }
};

struct PhaseRecords {
    std::vector<Record> all;  // A, F, B, b, J in file order
    std::vector<Record> begins, ends, marks;

    explicit PhaseRecords(const std::string& path) {
        for (auto& f : raw_records(path, "AFBbJ")) {
            Record r{all.size(), f};
            all.push_back(r);
            if (r.type() == 'B') begins.push_back(r);
            if (r.type() == 'b') ends.push_back(r);
            if (r.type() == 'J') marks.push_back(r);
        }
    }
    static std::string name(const Record& r) {  // B: field 5, J: field 4
        auto decoded = memguard::text::decode(r.f[r.type() == 'B' ? 5 : 4]);
        return decoded ? *decoded : "<undecodable>";
    }
    /// The B record of the phase named `n` (a failure when there is not exactly one).
    std::optional<Record> begin_named(const std::string& n) const {
        std::optional<Record> found;
        int count = 0;
        for (const Record& r : begins) {
            if (name(r) == n) {
                found = r;
                ++count;
            }
        }
        if (count != 1) {
            ADD_FAILURE() << count << " phases named '" << n << "', expected 1";
            return std::nullopt;
        }
        return found;
    }
    std::optional<Record> end_of(const std::string& id) const {
        std::optional<Record> found;
        int count = 0;
        for (const Record& r : ends) {
            if (r.f[3] == id) {
                found = r;
                ++count;
            }
        }
        if (count > 1) ADD_FAILURE() << count << " b records for phase " << id;
        return found;
    }
    std::vector<std::string> mark_names(const std::string& source) const {
        std::vector<std::string> out;
        for (const Record& r : marks) {
            if (r.f[3] == source) out.push_back(name(r));
        }
        return out;
    }
    /// Sizes of the A records between two record positions.
    std::vector<uint64_t> allocs_between(size_t lo, size_t hi) const {
        std::vector<uint64_t> out;
        for (const Record& r : all) {
            if (r.type() == 'A' && r.index > lo && r.index < hi) out.push_back(std::stoull(r.f[4]));
        }
        return out;
    }
};

/// `nvtx <label> <value>` lines of the program.
std::map<std::string, long long> nvtx_values(const std::string& out) {
    std::map<std::string, long long> values;
    for (const std::string& line : lines_starting_with(out, "nvtx ")) {
        auto space = line.find(' ', 5);
        values[line.substr(5, space - 5)] = std::stoll(line.substr(space + 1));
    }
    return values;
}

std::string tid_of(const AppLog& log, const std::string& key) { return std::to_string(log.value(key)); }

TEST_F(Phases, NvtxRangesMarksAndApiPhasesAreRecorded) {
    Env env = preload_env();
    env["MEMGUARD_LOG_LEVEL"] = "debug";
    ChildResult result = run("nvtx_phases", {}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    AppLog log = parse_app_log(result.out);
    auto values = nvtx_values(result.out);
    const std::string path = report_for(result.pid);
    ASSERT_TRUE(exists(path)) << describe(result);
    PhaseRecords p(path);

    // memguard named itself as the injection library, and three NVTX copies attached.
    EXPECT_EQ(lines_containing(result.out, "env NVTX_INJECTION64_PATH").at(0),
              "env NVTX_INJECTION64_PATH " + real_path(Paths::memguard_lib()));
    EXPECT_EQ(lines_containing(result.err, "NVTX instance 3 attached").size(), 1u) << describe(result);
    EXPECT_TRUE(lines_containing(result.err, "NVTX instance 4 attached").empty()) << describe(result);
    auto minor = lines_starting_with(report_text(path), "I format_minor ");
    ASSERT_EQ(minor.size(), 1u);
    EXPECT_GE(std::stoi(minor[0].substr(15)), 4) << "B/b/J records are minor 4";

    // Push/pop levels as NVTX defines them (0-based, scoped to the domain; -1: nothing to pop).
    EXPECT_EQ(values["push_outer"], 0);
    EXPECT_EQ(values["push_inner"], 1);
    EXPECT_EQ(values["pop_inner"], 1);
    EXPECT_EQ(values["push_main"], 1);
    EXPECT_EQ(values["pop_main"], 1);
    EXPECT_EQ(values["pop_outer"], 0);
    EXPECT_EQ(values["pop_empty"], -1);
    EXPECT_EQ(values["push_dom_step"], 0);
    EXPECT_EQ(values["push_default_d0"], 0);
    EXPECT_EQ(values["pop_dom_step"], 0);
    EXPECT_EQ(values["pop_default_d0"], 0);

    // Sources and names (W strings and registered strings decoded; named domains prefixed).
    const std::string main_tid = std::to_string(result.pid);
    struct Expected {
        std::string name, source;
    };
    const std::vector<Expected> expected = {
        {"load model", "api"}, {"outer", "nvtx"},         {"inner-\xc3\xbc\xe4\xb8\xad", "nvtx"},
        {"main own", "nvtx"},  {"dom::step", "nvtx"},     {"d0", "nvtx"},
        {"r1", "nvtx_range"},  {"dom::r2", "nvtx_range"},
    };
    std::set<std::string> ids;
    for (const Expected& e : expected) {
        SCOPED_TRACE(e.name);
        auto b = p.begin_named(e.name);
        ASSERT_TRUE(b);
        EXPECT_EQ(b->f[4], e.source);
        EXPECT_EQ(b->f[2], main_tid);
        EXPECT_TRUE(ids.insert(b->f[3]).second) << "phase ids are unique";
        EXPECT_NE(b->f[3], "0");
        auto end = p.end_of(b->f[3]);
        ASSERT_TRUE(end) << "the phase ended";
        EXPECT_GT(end->index, b->index);
        EXPECT_GE(std::stoll(end->f[1]), std::stoll(b->f[1])) << "time";
    }
    // Nothing else ended: not the API phase ended twice, not the unknown ids.
    EXPECT_EQ(p.ends.size(), p.begins.size());
    std::set<std::string> ended;
    for (const Record& r : p.ends) EXPECT_TRUE(ended.insert(r.f[3]).second) << "phase " << r.f[3] << " ended twice";

    // The API phase begun before the first allocation: kept until the report existed.
    auto load = p.begin_named("load model");
    auto outer = p.begin_named("outer");
    auto inner = p.begin_named("inner-\xc3\xbc\xe4\xb8\xad");
    ASSERT_TRUE(load && outer && inner);
    EXPECT_EQ(std::to_string(values["api_load"]), load->f[3]);
    EXPECT_LT(load->index, outer->index);
    ASSERT_FALSE(p.allocs_between(0, load->index).size()) << "B before the first A";

    // Nesting: outer contains inner, which holds the 2 MiB block; popping through another NVTX copy
    // ended the innermost range of the thread.
    auto inner_end = p.end_of(inner->f[3]);
    auto outer_end = p.end_of(outer->f[3]);
    ASSERT_TRUE(inner_end && outer_end);
    EXPECT_LT(outer->index, inner->index);
    EXPECT_LT(inner_end->index, outer_end->index);
    EXPECT_EQ(p.allocs_between(inner->index, inner_end->index), std::vector<uint64_t>{2u << 20});
    EXPECT_EQ(p.allocs_between(outer->index, outer_end->index), (std::vector<uint64_t>{1u << 20, 2u << 20}));

    // Domain scoping: popping "dom" ended dom::step (begun first), then d0 ended.
    auto step = p.begin_named("dom::step");
    auto d0 = p.begin_named("d0");
    ASSERT_TRUE(step && d0);
    auto step_end = p.end_of(step->f[3]);
    auto d0_end = p.end_of(d0->f[3]);
    ASSERT_TRUE(step_end && d0_end);
    EXPECT_LT(step->index, d0->index);
    EXPECT_LT(step_end->index, d0_end->index);

    // Start/end ranges overlap; the range ids NVTX returned are the phase ids; r2 ended on another
    // thread.
    auto r1 = p.begin_named("r1");
    auto r2 = p.begin_named("dom::r2");
    ASSERT_TRUE(r1 && r2);
    EXPECT_EQ(std::to_string(values["start_r1"]), r1->f[3]);
    EXPECT_EQ(std::to_string(values["start_r2"]), r2->f[3]);
    auto r1_end = p.end_of(r1->f[3]);
    auto r2_end = p.end_of(r2->f[3]);
    ASSERT_TRUE(r1_end && r2_end);
    EXPECT_LT(r2->index, r1_end->index) << "overlap: r2 began before r1 ended";
    EXPECT_LT(r1_end->index, r2_end->index);
    EXPECT_EQ(r2_end->f[2], tid_of(log, "ender_tid"));
    EXPECT_EQ(p.allocs_between(r2->index, r1_end->index), std::vector<uint64_t>{4u << 20});

    // Threads: each thread's phases nest on its own stack and carry its tid.
    for (int i = 0; i < 4; ++i) {
        std::string name = "thread-" + std::to_string(i);
        SCOPED_TRACE(name);
        auto t = p.begin_named(name);
        auto ti = p.begin_named(name + "/inner");
        ASSERT_TRUE(t && ti);
        const std::string tid = tid_of(log, "tid_" + name);
        EXPECT_EQ(t->f[2], tid);
        EXPECT_EQ(ti->f[2], tid);
        EXPECT_EQ(t->f[4], "nvtx");
        auto t_end = p.end_of(t->f[3]);
        auto ti_end = p.end_of(ti->f[3]);
        ASSERT_TRUE(t_end && ti_end);
        EXPECT_EQ(t_end->f[2], tid);
        EXPECT_EQ(ti_end->f[2], tid);
        EXPECT_LT(t->index, ti->index);
        EXPECT_LT(ti_end->index, t_end->index);
    }

    // Marks: NVTX (A, W, a named domain, the program's own copy) and the C API.
    std::vector<std::string> nvtx_marks = p.mark_names("nvtx");
    std::sort(nvtx_marks.begin(), nvtx_marks.end());
    EXPECT_EQ(nvtx_marks, (std::vector<std::string>{"dom::dmark", "main mark", "mark-a", "mark-w\xc3\xa9"}));
    EXPECT_EQ(p.mark_names("api"), (std::vector<std::string>{"started", "api mark"}));
}

TEST_F(Phases, AnotherInjectionLibraryIsRespected) {
    Env env = preload_env();
    env["MEMGUARD_LOG_LEVEL"] = "info";
    env["NVTX_INJECTION64_PATH"] = NVTX_OTHER_TOOL;
    ChildResult result = run("nvtx_phases", {}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_containing(result.out, "env NVTX_INJECTION64_PATH").at(0),
              std::string("env NVTX_INJECTION64_PATH ") + NVTX_OTHER_TOOL);
    EXPECT_EQ(lines_containing(result.err, "NVTX_INJECTION64_PATH names another tool").size(), 1u) << describe(result);
    // The other tool got every NVTX copy and its pushes.
    EXPECT_EQ(lines_containing(result.err, "other-tool attached").size(), 3u) << describe(result);
    EXPECT_EQ(lines_containing(result.err, "other-tool push outer").size(), 1u) << describe(result);
    PhaseRecords p(report_for(result.pid));
    for (const Record& r : p.begins) EXPECT_EQ(r.f[4], "api") << PhaseRecords::name(r);
    for (const Record& r : p.marks) EXPECT_EQ(r.f[3], "api") << PhaseRecords::name(r);
    EXPECT_EQ(p.begins.size(), 1u);
    EXPECT_EQ(p.ends.size(), 1u);
}

TEST_F(Phases, NvtxOffLeavesTheEnvironmentAlone) {
    Env env = preload_env();
    env["MEMGUARD_NVTX"] = "0";
    ChildResult result = run("nvtx_phases", {}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_containing(result.out, "env NVTX_INJECTION64_PATH").at(0), "env NVTX_INJECTION64_PATH (unset)");
    PhaseRecords p(report_for(result.pid));
    EXPECT_EQ(p.begins.size(), 1u);
    ASSERT_FALSE(p.begins.empty());
    EXPECT_EQ(PhaseRecords::name(p.begins[0]), "load model");
    EXPECT_EQ(p.mark_names("nvtx"), std::vector<std::string>{});
}

TEST_F(Phases, DisabledMemguardNeitherRegistersNorRecords) {
    Env env = preload_env();
    env["MEMGUARD_ENABLE"] = "0";
    ChildResult result = run("nvtx_phases", {}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_containing(result.out, "env NVTX_INJECTION64_PATH").at(0), "env NVTX_INJECTION64_PATH (unset)");
    auto values = nvtx_values(result.out);
    EXPECT_EQ(values["api_load"], 0) << "memguard_phase_begin returns 0 when memguard does not record";
    EXPECT_TRUE(find_reports(reports_).empty());
}

TEST_F(Phases, PhasesAloneCreateNoReport) {
    Env env = preload_env();
    env["MEMGUARD_LOG_LEVEL"] = "debug";
    ChildResult result = run("nvtx_phases", {"no_cuda"}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_containing(result.err, "NVTX instance 3 attached").size(), 1u) << describe(result);
    EXPECT_GT(nvtx_values(result.out)["api_load"], 0) << "phases are recorded (kept in memory)";
    EXPECT_TRUE(find_reports(reports_).empty()) << "a process that never allocates CUDA memory writes no report";
    EXPECT_TRUE(find_reports(work_).empty());
}

TEST_F(Phases, WithoutMemguardNvtxIsANoOp) {
    ChildResult result = run("nvtx_phases", {}, plain_env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    auto values = nvtx_values(result.out);
    // Without a tool, NVTX calls do nothing and return what NVTX's no-ops return.
    EXPECT_EQ(values["api_load"], 0);
    EXPECT_EQ(values["start_r1"], 0);
    EXPECT_EQ(values["pop_empty"], -2);  // NVTX_NO_PUSH_POP_TRACKING
}

}  // namespace
}  // namespace preload_test

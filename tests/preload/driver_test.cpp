// The driver lookup paths under memguard (issue 5): app_driver_paths / app_static_driver reach
// the fake driver (tests/fake_cuda/libcuda.so.1) through each path and run one workload; the
// report must hold the same records whatever the path, with the per-thread variants where the
// path selected them, and lookups memguard does not cover must come back untouched. Also: an
// allocation that passes the runtime and the driver is recorded once, and dlsym(RTLD_NEXT /
// RTLD_DEFAULT) keeps its caller-relative meaning with memguard's dlsym in between.
//
// The records are read as raw lines (the report reader's minor-3 support is tested on its own).
#include "preload_fixture.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace preload_test {
namespace {

struct PathCase {
    const char* program;  // APP_DRIVER_PATHS or APP_STATIC_DRIVER
    const char* path;
    bool per_thread;    // the path selects the _ptsz variants
    bool proc_address;  // the path looks up cuGetProcAddress itself
};

std::ostream& operator<<(std::ostream& os, const PathCase& c) { return os << c.path; }

const char* kDriverPaths = APP_DRIVER_PATHS;
const char* kStaticDriver = APP_STATIC_DRIVER;

const PathCase kCases[] = {
    {kDriverPaths, "direct", false, false},     {kDriverPaths, "direct_ptsz", true, false},
    {kDriverPaths, "dlsym", false, false},      {kDriverPaths, "dlsym_ptsz", true, false},
    {kDriverPaths, "proc_v1", false, true},     {kDriverPaths, "proc_v2", false, true},
    {kDriverPaths, "proc_v2_ptds", true, true}, {kDriverPaths, "proc_v2_legacy", false, true},
    {kDriverPaths, "entry", false, false},      {kDriverPaths, "entry_ptsz", true, false},
    {kDriverPaths, "by_version", false, false}, {kDriverPaths, "by_version_ptds", true, false},
    {kStaticDriver, "proc_v2", false, true},    {kStaticDriver, "proc_v2_ptds", true, true},
};

// Lookups the workload makes of functions memguard does not wrap (or of an ABI it does not).
const std::set<std::string> kUntouched = {"cuGraphCreate", "cuMemAlloc@2000", "cuMemGetAllocationGranularity",
                                          "cuMemExportToShareableHandle"};

class DriverTest : public PreloadTest {
protected:
    ChildResult run_program(const std::string& program, const std::vector<std::string>& args, const Env& env) {
        ChildOptions o;
        o.argv.push_back(program);
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.env = env;
        o.cwd = work_;
        return run_child(o);
    }

    /// `lookup <name> <module>` lines of the application's output.
    static std::map<std::string, std::string> lookups(const std::string& out) {
        std::map<std::string, std::string> result;
        for (const std::string& line : lines_starting_with(out, "lookup ")) {
            std::istringstream in(line);
            std::string word, name, module;
            in >> word >> name >> module;
            result[name] = module;
        }
        return result;
    }

    /// `alloc <api> <addr> <size>` lines: the addresses, in order.
    static std::vector<std::string> logged_addresses(const std::string& out) {
        std::vector<std::string> result;
        for (const std::string& line : lines_starting_with(out, "alloc ")) {
            std::istringstream in(line);
            std::string word, api, addr;
            in >> word >> api >> addr;
            result.push_back(addr.substr(2));  // without 0x, as the report writes it
        }
        return result;
    }
};

/// The report's records reduced to what must not depend on the path: addresses and handles are
/// replaced by their order of first appearance, times, threads and stack ids are dropped.
std::vector<std::string> normalized(const std::string& report_path, std::vector<std::string>* alloc_addrs) {
    std::map<std::string, std::string> names;
    auto name = [&](const std::string& prefix, const std::string& value) {
        auto it = names.find(prefix + value);
        if (it != names.end()) return it->second;
        std::string n = prefix + std::to_string(names.size());
        names[prefix + value] = n;
        return n;
    };
    // Host addresses of freed blocks may come back: each A names a new block.
    std::map<std::string, std::string> live_block;
    auto fresh = [&](const std::string& value) {
        std::string n = "b" + std::to_string(names.size());
        names["#" + std::to_string(names.size())] = n;
        live_block[value] = n;
        return n;
    };
    auto block = [&](const std::string& value) {
        auto it = live_block.find(value);
        return it == live_block.end() ? std::string("b?") : it->second;
    };
    std::vector<std::string> out;
    for (const auto& r : raw_records(report_path, "AEFVvNnQqmCcGLDK")) {
        const std::string& t = r[0];
        std::string s = t;
        auto f = [&](size_t i) { return i < r.size() ? r[i] : std::string("?"); };
        if (t == "A") {
            alloc_addrs->push_back(f(3));
            s += " " + fresh(f(3)) + " " + f(4) + " " + f(5) + " " + f(6) + " " + f(7) + " " + f(8) + " cap" + f(10);
        } else if (t == "E") {
            s += " " + f(3) + " " + f(4) + " " + f(5) + " " + f(6) + " err" + f(9);
        } else if (t == "F") {
            s += " " + block(f(3)) + " " + f(4) + " " + f(5) + " " + f(6);
        } else if (t == "V" || t == "v" || t == "q") {
            s += " " + name("va", f(3)) + " " + f(4);
        } else if (t == "N") {
            s += " " + name("h", f(3)) + " " + f(4) + " dev" + f(5) + " cap" + f(8);
        } else if (t == "n" || t == "m") {
            s += " " + name("h", f(3));
        } else if (t == "Q") {
            s += " " + name("va", f(3)) + " " + f(4) + " " + f(5) + " " + name("h", f(6));
        } else if (t == "C") {
            s += " " + f(3) + " " + f(4) + " " + f(5) + " " + (f(6) == "-" ? "-" : name("g", f(6)));
        } else if (t == "c") {
            s += " " + f(3) + " " + f(4) + " " + name("g", f(5));
        } else if (t == "G") {
            s += " " + name("x", f(3)) + " " + name("g", f(4)) + " " + f(5);
        } else if (t == "L") {
            s += " " + name("x", f(3)) + " " + f(4);
        } else if (t == "D") {
            s += " " + name("x", f(3));
        } else if (t == "K") {
            s += " " + name("g", f(3));
        }
        out.push_back(s);
    }
    return out;
}

/// What every path must produce. `null` is how the report writes the null stream of the
/// stream-ordered calls: 0 for the legacy variants, 2 (per-thread) for the _ptsz ones.
std::vector<std::string> expected_records(bool per_thread) {
    const std::string null = per_thread ? "2" : "0";
    const std::string pitch = std::to_string(1024 * 7);
    return {
        "A b0 3145728 device cuMemAlloc 0 - cap0",
        "A b1 5242880 managed cuMemAllocManaged 0 - cap0",
        "A b2 " + pitch + " device cuMemAllocPitch 0 - cap0",
        "A b3 45056 pinned cuMemHostAlloc -1 - cap0",
        "A b4 4294995968 pinned cuMemAllocHost -1 - cap0",  // cuMemAllocHost_v2, 4 GiB + 28 KiB
        "A b5 12288 pinned cuMemAllocHost -1 - cap0",       // cuMemAllocHost, the 32-bit-size ABI
        "A b6 53248 async cuMemAllocAsync 0 " + null + " cap0",
        "A b7 69632 async cuMemAllocAsync 0 5000 cap0",
        "A b8 77824 async cuMemAllocFromPoolAsync 0 5000 cap0",
        "E 4096 device cuMemAlloc 0 err1",  // cuMemAlloc(NULL, ...) fails: recorded as a failure
        "F b0 3145728 cuMemFree -",
        "F b3 45056 cuMemFreeHost -",
        "F b4 4294995968 cuMemFreeHost -",
        "F b5 12288 cuMemFreeHost -",
        "E 16384 pinned cuMemAllocHost -1 err1",  // cuMemAllocHost_v2(NULL, ...)
        "F b6 53248 cuMemFreeAsync " + null,
        "F b7 69632 cuMemFreeAsync 5000",
        "F b8 77824 cuMemFreeAsync 5000",
        "F b1 5242880 cuMemFree -",
        // The expandable segment.
        "V va9 33554432",
        "N h10 2097152 dev0 cap0",
        "Q va9 2097152 0 h10",
        "N h11 2097152 dev0 cap0",
        "Q va12 2097152 0 h11",
        "N h13 2097152 dev0 cap0",
        "Q va14 2097152 0 h13",
        "N h15 4194304 dev1 cap0",
        "Q va16 2097152 2097152 h15",
        "q va12 4194304",
        "n h11",
        "n h13",
        "n h10",
        "q va9 2097152",
        // The imported handle (m), mapped, unmapped, released; the failed import wrote nothing.
        "m h17",
        "Q va18 4194304 0 h17",
        "q va18 4194304",
        "n h17",
        "q va16 2097152",
        "n h15",
        "v va9 33554432",
        // Capture and graphs.
        "C 1 6000 thread_local -",
        "A b19 94208 async cuMemAllocAsync 0 6000 cap1",
        "c 1 0 g20",
        "G x21 g20 1",
        "L x21 6000",
        "L x21 6000",
        "D x21",
        "C 2 6000 global g22",
        "c 2 0 g22",
        "G x23 g22 2",
        "D x23",
        "K g20",
        "K g22",
        "F b19 94208 cuMemFreeAsync 6000",
    };
}

class DriverPaths : public DriverTest, public ::testing::WithParamInterface<PathCase> {};

TEST_P(DriverPaths, SameRecordsThroughEveryLookupPath) {
    const PathCase& c = GetParam();
    ChildResult result = run_program(c.program, {c.path}, preload_env());
    ASSERT_EQ(result.exit_code, 0) << describe(result) << result.out;
    ASSERT_FALSE(lines_starting_with(result.out, "done").empty()) << result.out;

    // Covered functions come back as memguard's wrappers; the rest untouched (from libcuda).
    auto found = lookups(result.out);
    ASSERT_GE(found.size(), 25u) << result.out;
    for (const auto& [name, module] : found) {
        if (kUntouched.count(name)) {
            EXPECT_EQ(module, "libcuda.so.1") << name;
        } else {
            EXPECT_EQ(module, "libmemguard.so") << name;
        }
    }
    if (c.proc_address) {
        EXPECT_EQ(found.count("cuGetProcAddress@self"), 1u);
        EXPECT_EQ(found.count("cuMemAlloc@2000"), 1u);
    }
    // Both ABIs of cuMemAllocHost were looked up (the CUDA 2.0 one by its symbol, or by base name
    // at version 2000), and came back wrapped (checked above).
    const std::string path = c.path;
    const bool by_symbol = path.rfind("direct", 0) == 0 || path.rfind("dlsym", 0) == 0;
    EXPECT_EQ(found.count("cuMemAllocHost_v2") + found.count("cuMemAllocHost"), by_symbol ? 2u : 1u);
    EXPECT_EQ(found.count("cuMemAllocHost@2000"), by_symbol ? 0u : 1u);

    std::vector<std::string> addrs;
    std::vector<std::string> got = normalized(report_for(result.pid), &addrs);
    std::vector<std::string> want = expected_records(c.per_thread);
    EXPECT_EQ(got, want) << "report " << report_for(result.pid);
    // The report's addresses are the ones the driver returned to the program.
    std::vector<std::string> logged = logged_addresses(result.out);
    ASSERT_GE(addrs.size(), logged.size());
    for (size_t i = 0; i < logged.size(); ++i) EXPECT_EQ(addrs[i], logged[i]) << i;
    // The CUDA 2.0 cuMemAlloc (4096 bytes, 32-bit ABI) went past memguard: no block of that size.
    for (const auto& r : raw_records(report_for(result.pid), "A")) EXPECT_NE(r[4], "4096");
}

TEST_P(DriverPaths, WithoutMemguardEveryLookupIsTheDriversOwn) {
    const PathCase& c = GetParam();
    ChildResult result = run_program(c.program, {c.path}, plain_env());
    ASSERT_EQ(result.exit_code, 0) << describe(result) << result.out;
    auto found = lookups(result.out);
    ASSERT_GE(found.size(), 25u) << result.out;
    for (const auto& [name, module] : found) EXPECT_EQ(module, "libcuda.so.1") << name;
    EXPECT_TRUE(list_dir(reports_).empty());
}

INSTANTIATE_TEST_SUITE_P(Paths, DriverPaths, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<PathCase>& info) {
                             std::string n = std::string(info.param.program == kStaticDriver ? "static_" : "") +
                                             info.param.path;
                             return n;
                         });

TEST_F(DriverTest, RuntimeAllocationThroughTheDriverIsRecordedOnce) {
    // The fake runtime calls cuMemAlloc_v2 / cuMemFree_v2 (found like the real runtime finds them,
    // through dlsym and cuGetProcAddress_v2, so memguard's driver wrappers are in the chain).
    Env env = preload_env();
    env["FAKE_CUDART_VIA_DRIVER"] = "1";
    ChildResult result = run_program(kDriverPaths, {"runtime"}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    auto records = raw_records(report_for(result.pid), "AF");
    ASSERT_EQ(records.size(), 2u) << report_text(report_for(result.pid));
    EXPECT_EQ(records[0][0], "A");
    EXPECT_EQ(records[0][4], std::to_string(29 * 4096));
    EXPECT_EQ(records[0][6], "cudaMalloc");
    EXPECT_EQ(records[1][0], "F");
    EXPECT_EQ(records[1][5], "cudaFree");
}

TEST_F(DriverTest, DlsymNextAndDefaultStayRelativeToTheCaller) {
    const std::vector<std::string> args = {APP_NEXT_PLUGIN};
    ChildResult plain = run_program(APP_DLSYM_NEXT, args, plain_env());
    ChildResult with = run_program(APP_DLSYM_NEXT, args, preload_env());
    ASSERT_EQ(plain.exit_code, 0) << describe(plain);
    ASSERT_EQ(with.exit_code, 0) << describe(with);
    // Without memguard nothing after the program defines cudaMalloc; with it, memguard is next.
    EXPECT_EQ(lines_starting_with(plain.out, "next main cudaMalloc"),
              std::vector<std::string>{"next main cudaMalloc none"});
    EXPECT_EQ(lines_starting_with(with.out, "next main cudaMalloc"),
              std::vector<std::string>{"next main cudaMalloc libmemguard.so"});
    // Everything else is the same with and without memguard: in particular the plugin, loaded
    // RTLD_LOCAL, finds the runtime in its own scope with RTLD_NEXT and RTLD_DEFAULT (memguard's
    // scope does not hold it), and failed lookups leave a dlerror message.
    const std::vector<std::string> same = {
        "default main cudaMalloc app_dlsym_next",
        "next main puts libc.so.6",
        "next plugin cudaMalloc libcudart.so.13",
        "default plugin fakecuda_alloc_count libcudart.so.13",
        "missing null error",
        "missing-handle null error",
    };
    for (const std::string& line : same) {
        EXPECT_EQ(lines_starting_with(plain.out, line).size(), 1u) << line << "\n" << plain.out;
        EXPECT_EQ(lines_starting_with(with.out, line).size(), 1u) << line << "\n" << with.out;
    }
}

}  // namespace
}  // namespace preload_test

// Allocator mode (MEMGUARD_ALLOCATOR=memguard): libmemguard.so's exported pluggable-allocator
// functions, called as PyTorch calls them (tests/apps/pluggable_alloc.cpp) against the fake
// runtime. The report's T/t/O/o records (docs/report-format.md, minor 5) are read raw here; the
// segments are ordinary A/F records.
#include <map>
#include <set>
#include <sstream>

#include "preload_fixture.h"

namespace preload_test {
namespace {

constexpr uint64_t MiB = 1024 * 1024;

struct LoggedBlock {
    uint64_t addr = 0, size = 0, stream = 0;
    std::string function;
};

uint64_t parse_ptr(const std::string& s) { return s == "(nil)" ? 0 : std::stoull(s, nullptr, 16); }
uint64_t hexu(const std::string& s) { return std::stoull(s, nullptr, 16); }
uint64_t decu(const std::string& s) { return std::stoull(s); }

/// The value of the application's `info <key> <value>` line ("" when absent).
std::string log_value(const std::string& out, const std::string& key) {
    auto lines = lines_starting_with(out, "info " + key + " ");
    return lines.empty() ? "" : lines[0].substr(6 + key.size());
}

std::vector<LoggedBlock> logged_blocks(const std::string& out) {
    std::vector<LoggedBlock> blocks;
    for (const std::string& line : lines_starting_with(out, "info block ")) {
        std::istringstream in(line);
        std::string info, block, addr, size, stream, function;
        in >> info >> block >> addr >> size >> stream >> function;
        blocks.push_back({parse_ptr(addr), decu(size), parse_ptr(stream), function});
    }
    return blocks;
}

class AllocatorMode : public PreloadTest {
protected:
    Env env() const {
        Env e = preload_env();
        e["MEMGUARD_ALLOCATOR"] = "memguard";
        return e;
    }
};

TEST_F(AllocatorMode, BlocksSegmentsAndFreesAreRecorded) {
    ChildResult result = run("pluggable_alloc", {"basic"}, env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    const std::string path = report_for(result.pid);
    auto r = load(path);
    ASSERT_TRUE(r);
    EXPECT_GE(std::stoi(r->info.at("format_minor")), 5) << "T/t/O/o records are minor 5";
    std::vector<LoggedBlock> logged = logged_blocks(result.out);
    ASSERT_EQ(logged.size(), 3u) << result.out;

    auto records = raw_records(path, "TtAF");
    std::vector<std::vector<std::string>> T, t, A, F;
    for (const auto& rec : records) {
        if (rec[0] == "T") T.push_back(rec);
        if (rec[0] == "t") t.push_back(rec);
        if (rec[0] == "A") A.push_back(rec);
        if (rec[0] == "F") F.push_back(rec);
    }
    ASSERT_EQ(T.size(), 3u);
    const uint64_t rounded[] = {1024, 3 * MiB, 4096};
    Symbolizer symbolizer(*r);
    for (size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE("block " + std::to_string(i) + " from " + logged[i].function);
        ASSERT_EQ(T[i].size(), 12u);
        EXPECT_EQ(hexu(T[i][3]), logged[i].addr);
        EXPECT_EQ(decu(T[i][4]), rounded[i]);
        EXPECT_EQ(decu(T[i][5]), logged[i].size);  // requested
        EXPECT_EQ(T[i][6], "0");                   // device
        EXPECT_EQ(hexu(T[i][7]), logged[i].stream);
        EXPECT_EQ(T[i][10], "0");  // no capture
        EXPECT_EQ(T[i][11], "-");  // default pools
        uint32_t sid = static_cast<uint32_t>(decu(T[i][8]));
        EXPECT_TRUE(symbolizer.has_function(sid, logged[i].function)) << symbolizer.describe(sid);
    }
    // Every block was returned, once, with no collection running.
    ASSERT_EQ(t.size(), 3u);
    std::set<uint64_t> freed;
    for (const auto& rec : t) {
        EXPECT_EQ(rec[4], "0");
        freed.insert(hexu(rec[3]));
    }
    EXPECT_EQ(freed, (std::set<uint64_t>{logged[0].addr, logged[1].addr, logged[2].addr}));

    // Segments: a small one per stream and a 20 MiB one for the 3 MiB request, each with the stack
    // of the tensor allocation that made it; all returned by empty_cache.
    ASSERT_EQ(A.size(), 3u);
    std::multiset<uint64_t> sizes;
    for (const auto& rec : A) {
        sizes.insert(decu(rec[4]));
        EXPECT_EQ(rec[5], "device");
        EXPECT_EQ(rec[6], "cudaMalloc");
    }
    EXPECT_EQ(sizes, (std::multiset<uint64_t>{2 * MiB, 2 * MiB, 20 * MiB}));
    for (size_t i = 0; i + 1 < records.size(); ++i) {
        if (records[i][0] != "A") continue;
        ASSERT_EQ(records[i + 1][0], "T") << "a segment is made for the block allocated right after it";
        EXPECT_EQ(records[i][9], records[i + 1][8]) << "the segment carries the block's native stack";
        EXPECT_EQ(records[i][11], records[i + 1][9]) << "and its Python stack";
    }
    ASSERT_EQ(F.size(), 3u);
    for (const auto& rec : F) EXPECT_EQ(rec[5], "cudaFree");
    EXPECT_EQ(log_value(result.out, "fake_live_bytes"), "0");
}

TEST_F(AllocatorMode, SegmentsMadeThroughTheDriverAreRecordedOnce) {
    // The real runtime's cudaMalloc calls cuMemAlloc_v2, found through cuGetProcAddress, so
    // memguard's driver wrapper is inside the allocator's own cudaMalloc. The segment is the
    // allocator's (one A record, cudaMalloc); the driver call under it is not another segment.
    Env e = env();
    e["FAKE_CUDART_VIA_DRIVER"] = "1";
    ChildResult result = run("pluggable_alloc", {"basic"}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    auto records = raw_records(report_for(result.pid), "AF");
    std::vector<std::string> apis;
    for (const auto& rec : records) apis.push_back(rec[0] + " " + (rec[0] == "A" ? rec[6] : rec[5]));
    EXPECT_EQ(apis, (std::vector<std::string>{"A cudaMalloc", "A cudaMalloc", "A cudaMalloc", "F cudaFree",
                                              "F cudaFree", "F cudaFree"}));
    EXPECT_EQ(log_value(result.out, "fake_live_bytes"), "0");
}

TEST_F(AllocatorMode, CaptureAllocationsComeFromThePrivatePoolWithoutBreakingTheCapture) {
    ChildResult result = run("pluggable_alloc", {"capture"}, env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    // cudaMalloc during a global-mode capture would invalidate it: memguard allocates in relaxed mode.
    EXPECT_EQ(lines_starting_with(result.out, "result end_capture_1 0").size(), 1u) << result.out;
    EXPECT_EQ(lines_starting_with(result.out, "result end_capture_2 0").size(), 1u) << result.out;
    const std::string path = report_for(result.pid);
    std::vector<LoggedBlock> logged = logged_blocks(result.out);
    ASSERT_EQ(logged.size(), 4u) << result.out;  // g1, tmp, outside, g2

    auto records = raw_records(path, "TtAFCcW");
    std::vector<std::string> capture_ids;
    for (const auto& rec : records) {
        if (rec[0] == "C") capture_ids.push_back(rec[3]);
        if (rec[0] == "W" && rec[3] == "unsafe_call") ADD_FAILURE() << "unsafe call during the capture: " << rec[4];
    }
    ASSERT_EQ(capture_ids.size(), 2u);
    std::map<uint64_t, std::vector<std::string>> blocks;  // addr -> its first T
    std::vector<std::vector<std::string>> T;
    for (const auto& rec : records) {
        if (rec[0] == "T") T.push_back(rec);
    }
    ASSERT_EQ(T.size(), 4u);
    const char* want_capture[] = {capture_ids[0].c_str(), capture_ids[0].c_str(), "0", capture_ids[1].c_str()};
    const char* want_pool[] = {"1.0", "1.0", "-", "1.0"};
    for (size_t i = 0; i < 4; ++i) {
        SCOPED_TRACE("block " + std::to_string(i) + " from " + logged[i].function);
        EXPECT_EQ(hexu(T[i][3]), logged[i].addr);
        EXPECT_EQ(T[i][10], want_capture[i]);
        EXPECT_EQ(T[i][11], want_pool[i]);
    }
    // The block freed during the first capture went back to the pool: no cudaFree while capturing,
    // and segments made during a capture belong to it.
    bool capturing = false;
    std::string current;
    int owned_segments = 0;
    for (const auto& rec : records) {
        if (rec[0] == "C") {
            capturing = true;
            current = rec[3];
        } else if (rec[0] == "c") {
            capturing = false;
        } else if (rec[0] == "F") {
            EXPECT_FALSE(capturing) << "a segment was freed during a capture";
        } else if (rec[0] == "A" && capturing) {
            EXPECT_EQ(rec[10], current) << "a segment made during a capture belongs to it";
            ++owned_segments;
        }
    }
    EXPECT_EQ(owned_segments, 2);  // the small segment of capture 1, the large one of capture 2
    // Released by both graphs and emptied: every segment returned.
    size_t a = 0, f = 0;
    for (const auto& rec : records) {
        a += rec[0] == "A";
        f += rec[0] == "F";
    }
    EXPECT_EQ(a, f);
    EXPECT_EQ(log_value(result.out, "fake_live_bytes"), "0");
}

TEST_F(AllocatorMode, OutOfMemoryIsRecordedWithTheLiveBlocksBySiteAndThrown) {
    Env e = env();
    e["FAKE_CUDA_CAPACITY"] = std::to_string(100 * MiB);
    ChildResult result = run("pluggable_alloc", {"oom"}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(log_value(result.out, "held"), "4");
    EXPECT_EQ(log_value(result.out, "held_with_fraction"), "2");
    auto oom_lines = lines_starting_with(result.out, "info oom ");
    ASSERT_EQ(oom_lines.size(), 2u);
    EXPECT_NE(oom_lines[0].find("CUDA out of memory"), std::string::npos) << oom_lines[0];
    // PyTorch's sentence for the memory fraction (its message, memguard's figures).
    EXPECT_NE(oom_lines[1].find("of which 52.00 MiB is free. 50.00 MiB allowed; Of the allocated memory 48.00 MiB"),
              std::string::npos)
        << oom_lines[1];

    const std::string path = report_for(result.pid);
    auto r = load(path);
    ASSERT_TRUE(r);
    auto records = raw_records(path, "Oo");
    ASSERT_EQ(records.size(), 4u);  // each O followed by its one site
    struct Want {
        uint64_t allocated, limit;
    };
    const Want want[] = {{4 * 24 * MiB, 0}, {2 * 24 * MiB, 50 * MiB}};
    Symbolizer symbolizer(*r);
    for (size_t i = 0; i < 2; ++i) {
        const auto& o = records[2 * i];
        const auto& site = records[2 * i + 1];
        SCOPED_TRACE("oom " + std::to_string(i));
        ASSERT_EQ(o[0], "O");
        ASSERT_EQ(o.size(), 12u);
        EXPECT_EQ(o[3], "0");
        EXPECT_EQ(decu(o[4]), 24 * MiB);
        EXPECT_EQ(decu(o[5]), 24 * MiB);
        EXPECT_EQ(decu(o[6]), want[i].allocated);
        EXPECT_EQ(decu(o[7]), want[i].allocated);  // reserved: the cache was emptied first
        EXPECT_EQ(decu(o[8]), want[i].limit);
        EXPECT_EQ(o[11], "cache");  // no Python in this process: nothing but the cache to free
        uint32_t sid = static_cast<uint32_t>(decu(o[9]));
        EXPECT_TRUE(symbolizer.has_function(sid, "allocate_weights")) << symbolizer.describe(sid);
        ASSERT_EQ(site[0], "o");
        EXPECT_EQ(site[2], o[9]) << "the live blocks were allocated at the same site";
        EXPECT_EQ(decu(site[4]), want[i].allocated / (24 * MiB));
        EXPECT_EQ(decu(site[5]), want[i].allocated);
    }
}

// With PyTorch's libc10 loaded (RTLD_LOCAL, as under Python) the failure is c10::OutOfMemoryError,
// which PyTorch's binding raises as torch.cuda.OutOfMemoryError; without it (the test above) the
// application catches memguard's std::bad_alloc. The O record is written either way.
TEST_F(AllocatorMode, OutOfMemoryIsTorchsOutOfMemoryErrorWhenLibc10IsLoaded) {
#ifndef MGTEST_LIBC10
    GTEST_SKIP() << "no torch with libc10.so for the tests' Python";
#else
    Env e = env();
    e["FAKE_CUDA_CAPACITY"] = std::to_string(100 * MiB);
    ChildResult result = run("pluggable_alloc", {"oom_c10", MGTEST_LIBC10}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(log_value(result.out, "held"), "4");
    EXPECT_EQ(log_value(result.out, "oom_thrown"), "N3c1016OutOfMemoryErrorE") << describe(result);
    EXPECT_EQ(log_value(result.out, "oom_dynamic"), "N3c1016OutOfMemoryErrorE") << describe(result);
    EXPECT_EQ(log_value(result.out, "oom")
                  .rfind("CUDA out of memory. Tried to allocate 24.00 MiB. GPU 0 has a total capacity of 100.00 MiB",
                         0),
              0u)
        << describe(result);
    auto o = raw_records(report_for(result.pid), "O");
    ASSERT_EQ(o.size(), 1u);
    EXPECT_EQ(decu(o[0][4]), 24 * MiB);
#endif
}

TEST_F(AllocatorMode, ARetriedDeviceAllocationLeavesNoRuntimeErrorBehind) {
    Env e = env();
    e["FAKE_CUDA_CAPACITY"] = std::to_string(100 * MiB);
    ChildResult result = run("pluggable_alloc", {"retry"}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(log_value(result.out, "retry_alloc"), "0") << describe(result);
    // cudaErrorMemoryAllocation from the first attempt would surface in PyTorch's next
    // C10_CUDA_KERNEL_LAUNCH_CHECK as an error of its own.
    EXPECT_EQ(log_value(result.out, "last_error"), "0") << describe(result);
}

TEST_F(AllocatorMode, UnknownPointerIsIgnoredWithOneWarning) {
    ChildResult result = run("pluggable_alloc", {"unknown"}, env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_containing(result.err, "was not allocated by memguard's allocator").size(), 1u) << result.err;
    auto t = raw_records(report_for(result.pid), "t");
    ASSERT_EQ(t.size(), 1u);  // only the real block's free
}

TEST_F(AllocatorMode, PyTorchAllocConfSettingsItCannotApplyAreNamedOnce) {
    Env e = env();
    e["PYTORCH_CUDA_ALLOC_CONF"] =
        "expandable_segments:true,max_split_size_mb:512,garbage_collection_threshold:0.5,"
        "release_lock_on_cudamalloc:True";
    ChildResult result = run("pluggable_alloc", {"basic"}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    auto lines = lines_containing(result.err, "PYTORCH_CUDA_ALLOC_CONF");
    ASSERT_EQ(lines.size(), 2u) << result.err;
    EXPECT_NE(lines[0].find("expandable_segments:true: expected True or False"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("release_lock_on_cudamalloc:True: not used"), std::string::npos) << lines[1];
    EXPECT_EQ(raw_records(report_for(result.pid), "T").size(), 3u);
}

// expandable_segments:True over the fake driver (loaded as the real runtime loads libcuda): the
// pools grow by mapping pages, recorded as the driver hooks record PyTorch's own expandable
// segments, and no segment is cudaMalloc'ed.
TEST_F(AllocatorMode, ExpandableSegmentsGrowThroughTheDriversVirtualMemoryCalls) {
    Env e = env();
    e["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True";
    const std::string cudart = Paths::fake_cudart();
    e["LD_PRELOAD"] += ":" + cudart.substr(0, cudart.rfind('/')) + "/libcuda.so.1";
    ChildResult result = run("pluggable_alloc", {"basic"}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(lines_containing(result.err, "PYTORCH_CUDA_ALLOC_CONF").size(), 0u) << result.err;
    const std::string path = report_for(result.pid);
    std::map<std::string, std::vector<std::vector<std::string>>> by;
    for (const auto& rec : raw_records(path, "TtAVNQqnv")) by[rec[0]].push_back(rec);
    EXPECT_EQ(by["T"].size(), 3u);
    EXPECT_EQ(by["A"].size(), 0u) << "a segment was cudaMalloc'ed";
    // Blocks on two streams, small and large: a range per pool and stream, pages mapped in them.
    EXPECT_GE(by["V"].size(), 2u);
    EXPECT_GE(by["N"].size(), 2u);
    EXPECT_EQ(by["Q"].size(), by["N"].size());
    // The basic scenario ends with empty_cache after freeing everything: every page goes.
    EXPECT_EQ(by["q"].size(), by["Q"].size());
    EXPECT_EQ(by["n"].size(), by["N"].size());
    EXPECT_EQ(by["v"].size(), by["V"].size());
    auto r = load(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->warnings.size(), 0u);
}

TEST_F(AllocatorMode, BadAllocatorValueWarnsOnceAndKeepsNative) {
    Env e = preload_env();
    e["MEMGUARD_ALLOCATOR"] = "pytorch";
    ChildResult result = run("noop", {}, e);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    auto lines = lines_containing(result.err, "MEMGUARD_ALLOCATOR");
    ASSERT_EQ(lines.size(), 1u) << result.err;
    EXPECT_NE(lines[0].find(
                  "'pytorch' is not valid: expected native (PyTorch's allocator) or memguard; keeping native"),
              std::string::npos)
        << lines[0];
}

// The stack is cut to MEMGUARD_STACK_DEPTH frames below memguard's own: exactly the innermost
// frames of the whole stack, however little is unwound to get them.
TEST_F(AllocatorMode, StackDepthKeepsExactlyTheInnermostFrames) {
    // The functions of the T record's native stack, innermost first.
    auto deep_stack = [](const std::string& path) {
        std::vector<std::string> functions;
        auto r = load(path);
        auto T = raw_records(path, "T");
        if (!r || T.size() != 1u) return functions;
        Symbolizer symbolizer(*r);
        for (const auto& f : symbolizer.frames(static_cast<uint32_t>(decu(T[0][8])))) functions.push_back(f.function);
        return functions;
    };
    Env e = env();
    e["MEMGUARD_STACK_DEPTH"] = "256";
    ChildResult whole = run("pluggable_alloc", {"deep"}, e);
    ASSERT_EQ(whole.exit_code, 0) << describe(whole);
    std::vector<std::string> all = deep_stack(report_for(whole.pid));
    ASSERT_GT(all.size(), 100u);
    EXPECT_EQ(all[0], "allocate_activation");
    EXPECT_EQ(all[1], "allocate_deep");
    for (int depth : {1, 20, 64, 101}) {
        SCOPED_TRACE("MEMGUARD_STACK_DEPTH=" + std::to_string(depth));
        e["MEMGUARD_STACK_DEPTH"] = std::to_string(depth);
        ChildResult cut = run("pluggable_alloc", {"deep"}, e);
        ASSERT_EQ(cut.exit_code, 0) << describe(cut);
        std::vector<std::string> got = deep_stack(report_for(cut.pid));
        std::vector<std::string> want(all.begin(), all.begin() + depth);
        EXPECT_EQ(got, want);
    }
}

// Threads allocating and freeing the same size on one stream reuse each other's blocks at once:
// the report must still give every address T, t, T, t ... (a free is written before the block
// can be handed out again, and the writer thread keeps the order of the packed records).
TEST_F(AllocatorMode, ThreadsReusingBlocksKeepEachAddressesRecordsInOrder) {
    ChildResult result = run("pluggable_alloc", {"threads"}, env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    std::map<std::string, char> last;  // address -> type of its last record
    size_t allocs = 0, frees = 0, out_of_order = 0;
    for (const auto& rec : raw_records(report_for(result.pid), "Tt")) {
        ASSERT_GE(rec.size(), 4u);
        const char type = rec[0][0];
        char& prev = last[rec[3]];
        if (type == 'T') {
            ++allocs;
            if (prev == 'T') ++out_of_order;
        } else {
            ++frees;
            if (prev != 'T') ++out_of_order;
        }
        prev = type;
    }
    EXPECT_EQ(allocs, 80000u);
    EXPECT_EQ(frees, 80000u);
    EXPECT_EQ(out_of_order, 0u);
}

// A fork while another thread allocates and frees must not leave the child's allocator locked:
// the device locks are held across fork (each child allocates once; a hung child fails this).
TEST_F(AllocatorMode, ForkWhileAnotherThreadAllocatesLeavesTheChildUsable) {
    ChildResult result = run("pluggable_alloc", {"fork"}, env());
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(log_value(result.out, "forks"), "40 hung 0 failed 0") << result.out;
}

}  // namespace
}  // namespace preload_test

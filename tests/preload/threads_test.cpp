// threads under memguard: 8 threads allocating and freeing at once; every block is accounted for
// by its size, which encodes its thread and iteration.
#include "preload_fixture.h"

#include <set>

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

class Threads : public PreloadTest {};

struct Origin {
    int thread = -1;
    int iteration = -1;  // -1 for the thread's block left live
};

TEST_F(Threads, EightThreadsCountsAndTotalsAreExact) {
    Env env = preload_env();
    env["FAKE_CUDA_DEVICES"] = "2";
    ChildResult result = run("threads", {}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    AppLog log = parse_app_log(result.out);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->complete);
    EXPECT_TRUE(r->warnings.empty()) << "first warning: " << r->warnings.front();
    EXPECT_TRUE(r->failures.empty());

    std::map<uint64_t, Origin> origin_of_size;
    uint64_t expected_bytes = 0, expected_live = 0;
    for (int t = 0; t < k_thread_count; ++t) {
        for (int i = 0; i < k_thread_iterations; ++i) {
            origin_of_size[thread_block_size(t, i)] = {t, i};
            expected_bytes += thread_block_size(t, i);
        }
        origin_of_size[thread_leak_size(t)] = {t, -1};
        expected_bytes += thread_leak_size(t);
        expected_live += thread_leak_size(t);
    }
    const size_t expected_blocks = static_cast<size_t>(k_thread_count) * (k_thread_iterations + 1);
    ASSERT_EQ(origin_of_size.size(), expected_blocks) << "sizes must identify blocks";

    EXPECT_EQ(r->blocks.size(), expected_blocks);
    EXPECT_EQ(r->blocks.size(), log.value("fake_alloc_count"));
    uint64_t total_bytes = 0;
    std::set<uint64_t> seen_sizes;
    std::map<int, std::set<uint64_t>> tids_of_thread;
    Symbolizer symbolizer(*r);
    int stack_failures = 0;
    for (const report::Block& block : r->blocks) {
        total_bytes += block.size;
        auto it = origin_of_size.find(block.size);
        if (it == origin_of_size.end()) {
            ADD_FAILURE() << "a block of " << block.size << " bytes that no thread allocated";
            continue;
        }
        EXPECT_TRUE(seen_sizes.insert(block.size).second) << block.size << " recorded twice";
        const Origin origin = it->second;
        SCOPED_TRACE("thread " + std::to_string(origin.thread) + " iteration " + std::to_string(origin.iteration));
        tids_of_thread[origin.thread].insert(block.tid);
        EXPECT_EQ(block.device, origin.thread % 2);
        bool leaked = origin.iteration < 0;
        bool async = !leaked && origin.iteration % k_thread_async_every == 0;
        EXPECT_EQ(block.api, async ? "cudaMallocAsync" : "cudaMalloc");
        EXPECT_STREQ(report::kind_name(block.kind), async ? "async" : "device");
        EXPECT_EQ(block.stream, async ? std::optional<uint64_t>(2) : std::nullopt);
        EXPECT_EQ(block.t_free.has_value(), !leaked);
        if (!leaked) {
            EXPECT_EQ(block.free_api, async ? "cudaFreeAsync" : "cudaFree");
        }
        const char* function = leaked ? "thread_leak" : "thread_alloc";
        if (!symbolizer.has_function(block.stack_id, function) && ++stack_failures <= 3) {
            ADD_FAILURE() << "stack without " << function << "\n" << symbolizer.describe(block.stack_id);
        }
    }
    EXPECT_EQ(stack_failures, 0);
    EXPECT_EQ(total_bytes, expected_bytes);
    EXPECT_EQ(live_gpu_bytes_at_exit(*r), expected_live);
    EXPECT_EQ(live_gpu_bytes_at_exit(*r), log.value("fake_live_bytes"));

    // Each thread's blocks carry one thread id, and the threads' ids differ.
    std::set<uint64_t> all_tids;
    for (const auto& [thread, tids] : tids_of_thread) {
        EXPECT_EQ(tids.size(), 1u) << "thread " << thread << " appears under several ids";
        all_tids.insert(tids.begin(), tids.end());
    }
    EXPECT_EQ(all_tids.size(), static_cast<size_t>(k_thread_count));

    // Every allocation and free is an event, and each block is freed at most once.
    size_t allocs = 0, frees = 0;
    for (const report::Event& event : r->events) {
        allocs += event.type == report::Event::Alloc ? 1 : 0;
        frees += event.type == report::Event::Free ? 1 : 0;
    }
    EXPECT_EQ(allocs, expected_blocks);
    EXPECT_EQ(frees, static_cast<size_t>(k_thread_count) * k_thread_iterations);
}

}  // namespace
}  // namespace preload_test

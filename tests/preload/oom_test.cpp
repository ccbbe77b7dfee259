// oom under memguard: out-of-memory from exhausted capacity (per device, shared by the GPU kinds)
// and from injected failures, recorded as E records with the bytes live at that moment.
#include "log_checks.h"
#include "preload_fixture.h"

namespace preload_test {
namespace {

namespace report = memguard::report;
using namespace app_sizes;

class Oom : public PreloadTest {};

TEST_F(Oom, ExhaustedCapacityAndInjectedFailuresAreRecorded) {
    Env env = preload_env();
    env["FAKE_CUDA_CAPACITY"] = std::to_string(k_oom_capacity);
    env["FAKE_CUDA_DEVICES"] = "2";
    ChildResult result = run("oom", {"capacity"}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    AppLog log = parse_app_log(result.out);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->complete);

    // What the test knows independently of the application's log.
    const uint64_t full = (k_oom_capacity / k_oom_block) * k_oom_block;  // 6 blocks: 60 MiB
    struct Expected {
        const char* api;
        uint64_t size;
        int error;
        int device;
        uint64_t live_bytes;  // ignored for pinned memory
    };
    const Expected expected[] = {
        {"cudaMalloc", k_oom_block, 2, 0, full},
        {"cudaMallocAsync", k_oom_block, 2, 0, full},
        {"cudaMallocManaged", k_oom_block, 2, 0, full},
        {"cudaMalloc", k_oom_small, 2, 0, full - k_oom_block},  // injected, one block freed
        {"cudaMallocHost", k_oom_small, k_injected_error, -1, 0},
        {"cudaMalloc", k_oom_device1_big, 2, 1, 2 * k_oom_block},  // device 0 is still full
    };
    ASSERT_EQ(log.failures.size(), std::size(expected)) << result.out;
    ASSERT_EQ(r->failures.size(), std::size(expected));
    Symbolizer symbolizer(*r);
    for (size_t i = 0; i < std::size(expected); ++i) {
        const report::FailedAlloc& got = r->failures[i];
        const Expected& want = expected[i];
        SCOPED_TRACE("failure #" + std::to_string(i) + ": " + want.api + " of " + std::to_string(want.size) +
                     " on device " + std::to_string(want.device));
        EXPECT_EQ(got.api, want.api);
        EXPECT_EQ(got.size, want.size);
        EXPECT_EQ(got.error, want.error);
        EXPECT_EQ(got.is_oom(), want.error == 2);
        EXPECT_EQ(got.device, want.device);
        EXPECT_STREQ(report::kind_name(got.kind), report::kind_name(kind_of_api(want.api)));
        if (want.device >= 0) {
            EXPECT_EQ(got.live_bytes, want.live_bytes);
            EXPECT_EQ(got.live_bytes, log.failures[i].live_bytes) << "the application's own count";
        }
        EXPECT_TRUE(symbolizer.has_function(got.stack_id, log.failures[i].function))
            << symbolizer.describe(got.stack_id);
    }
    int oom_events = 0;
    for (const report::FailedAlloc& failure : r->failures) oom_events += failure.is_oom() ? 1 : 0;
    EXPECT_EQ(oom_events, 5);

    // The successful allocations around the failures are all there, and all freed.
    expect_report_matches_log(*r, report_for(result.pid), log);
    EXPECT_EQ(live_gpu_bytes_at_exit(*r), 0u);
    EXPECT_EQ(nonnull_blocks(*r).size(), log.value("fake_alloc_count"));
}

TEST_F(Oom, FailAtMakesTheNthCallFail) {
    Env env = preload_env();
    env["FAKE_CUDA_FAIL_AT"] = "3";
    ChildResult result = run("oom", {"fail_at"}, env);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    AppLog log = parse_app_log(result.out);
    ASSERT_EQ(log.value("failures"), 1u);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);

    ASSERT_EQ(r->failures.size(), 1u);
    const report::FailedAlloc& failure = r->failures[0];
    EXPECT_EQ(failure.api, "cudaMalloc");
    EXPECT_EQ(failure.size, k_fail_at_block);
    EXPECT_TRUE(failure.is_oom());
    EXPECT_EQ(failure.live_bytes, 2 * k_fail_at_block);  // the first two calls succeeded
    EXPECT_EQ(nonnull_blocks(*r).size(), static_cast<size_t>(k_fail_at_calls - 1));
    // The failure sits between the second and the third block in the file.
    std::vector<std::vector<std::string>> records = raw_records(report_for(result.pid), "AE");
    ASSERT_EQ(records.size(), static_cast<size_t>(k_fail_at_calls));
    EXPECT_EQ(records[2][0], "E");
    expect_report_matches_log(*r, report_for(result.pid), log);
}

}  // namespace
}  // namespace preload_test

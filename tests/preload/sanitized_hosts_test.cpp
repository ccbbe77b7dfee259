// libmemguard.so preloaded into programs built with gcc's sanitizers (docs/security.md, "Kept in CI"):
// tests/apps/sanitized_host.cpp (4 threads allocating and freeing for 0.7 s while the report is
// flushed, each leaving a block live and exiting) built with -fsanitize=address,undefined and with
// -fsanitize=thread. The host must keep its exit code and print no sanitizer report, and the report
// must hold every block with a stack naming its function.
//
// AddressSanitizer's shared runtime must be the first object of the process, so it comes first in
// LD_PRELOAD (or its link-order check is turned off); ThreadSanitizer's needs nothing. In a build of
// memguard with MEMGUARD_SANITIZE=thread the library itself is instrumented too, which is where its
// dlsym hook once crashed inside ThreadSanitizer's initialization.
#include "preload_fixture.h"

#include <set>

namespace preload_test {
namespace {

namespace report = memguard::report;

constexpr int k_host_exit_code = 23;
// tests/apps/sanitized_host.cpp
constexpr int k_host_threads = 4;
constexpr uint64_t host_leak_size(int t) { return static_cast<uint64_t>(t + 1) * 1'000'000 + 999'999; }

class SanitizedHost : public PreloadTest {
protected:
    ChildResult run_host(const std::string& path, const Env& env) {
        ChildOptions o;
        o.argv = {path, std::to_string(k_host_exit_code)};
        o.env = env;
        o.cwd = work_;
        return run_child(o, 120'000);
    }

    /// The host's report: each thread's blocks (their sizes name the thread) as many as it logged,
    /// all freed but its last, each with a stack through the function that allocated it.
    void expect_host_report(const ChildResult& result) {
        AppLog log = parse_app_log(result.out);
        auto r = load(report_for(result.pid));
        ASSERT_TRUE(r);
        EXPECT_TRUE(r->complete);
        EXPECT_TRUE(r->warnings.empty()) << "first warning: " << r->warnings.front();
        std::map<int, uint64_t> blocks_of_thread;
        std::map<int, std::set<uint64_t>> tids_of_thread;
        uint64_t expected_live = 0;
        for (int t = 0; t < k_host_threads; ++t) expected_live += host_leak_size(t);
        Symbolizer symbolizer(*r);
        int stack_failures = 0;
        for (const report::Block& block : r->blocks) {
            const int t = static_cast<int>(block.size / 1'000'000) - 1;
            if (t < 0 || t >= k_host_threads) {
                ADD_FAILURE() << "a block of " << block.size << " bytes that no thread allocated";
                continue;
            }
            ++blocks_of_thread[t];
            tids_of_thread[t].insert(block.tid);
            const bool leaked = block.size == host_leak_size(t);
            EXPECT_EQ(block.t_free.has_value(), !leaked) << block.size;
            const char* function = leaked ? "host_leak" : "host_alloc";
            if (!symbolizer.has_function(block.stack_id, function) && ++stack_failures <= 3) {
                ADD_FAILURE() << "stack without " << function << "\n" << symbolizer.describe(block.stack_id);
            }
        }
        EXPECT_EQ(stack_failures, 0);
        for (int t = 0; t < k_host_threads; ++t) {
            EXPECT_EQ(blocks_of_thread[t], log.value("allocs_" + std::to_string(t))) << "thread " << t;
            EXPECT_EQ(tids_of_thread[t].size(), 1u) << "thread " << t;
        }
        EXPECT_EQ(live_gpu_bytes_at_exit(*r), expected_live);
        EXPECT_EQ(live_gpu_bytes_at_exit(*r), log.value("fake_live_bytes"));
    }

    static void expect_no_sanitizer_report(const ChildResult& result) {
        for (const char* tool : {"AddressSanitizer", "ThreadSanitizer", "LeakSanitizer", "runtime error:"}) {
            EXPECT_EQ(result.err.find(tool), std::string::npos) << describe(result);
        }
    }
};

#ifdef APP_ASAN_HOST
TEST_F(SanitizedHost, AsanRuntimeFirstInPreload) {
    Env env = preload_env();
    env["LD_PRELOAD"] = std::string(ASAN_RUNTIME) + ":" + Paths::memguard_lib();
    ChildResult result = run_host(APP_ASAN_HOST, env);
    ASSERT_EQ(result.exit_code, k_host_exit_code) << describe(result);
    expect_no_sanitizer_report(result);
    expect_host_report(result);
}

TEST_F(SanitizedHost, AsanWithItsLinkOrderCheckOff) {
    Env env = preload_env();
    env["ASAN_OPTIONS"] = "verify_asan_link_order=0";
    ChildResult result = run_host(APP_ASAN_HOST, env);
    ASSERT_EQ(result.exit_code, k_host_exit_code) << describe(result);
    expect_no_sanitizer_report(result);
    expect_host_report(result);
}

// What docs/security.md, "Kept in CI" says happens with libmemguard.so alone in LD_PRELOAD: AddressSanitizer
// refuses to start (its runtime is not the first object), before anything of memguard's ran.
TEST_F(SanitizedHost, AsanRefusesToStartBehindMemguard) {
    ChildResult result = run_host(APP_ASAN_HOST, preload_env());
    EXPECT_EQ(result.exit_code, 1) << describe(result);
    EXPECT_NE(result.err.find("ASan runtime does not come first"), std::string::npos) << describe(result);
    EXPECT_TRUE(list_dir(reports_).empty());
}
#endif

#ifdef APP_TSAN_HOST
// Every thread of the program allocates (so libmemguard captures stacks on it) and exits while the
// program runs on. With libunwind's per-thread cache, each such thread crashed at its exit inside
// ThreadSanitizer's pthread_mutex_lock (src/track/unwind.cpp); and ThreadSanitizer, blind to the
// uninstrumented library's own locks, took the report buffer's copies for data races and changed the
// exit code to 66 (src/runtime/sanitizers.cpp).
TEST_F(SanitizedHost, TsanThreadsAllocateAndExit) {
    ChildResult result = run_host(APP_TSAN_HOST, preload_env());
    ASSERT_EQ(result.exit_code, k_host_exit_code) << describe(result);
    expect_no_sanitizer_report(result);
    expect_host_report(result);
    auto r = load(report_for(result.pid));
    ASSERT_TRUE(r);
    // libgcc's unwinder, which keeps no per-thread state (src/track/unwind.cpp).
    EXPECT_EQ(r->info["unwinder"], "libgcc");
}
#endif

}  // namespace
}  // namespace preload_test

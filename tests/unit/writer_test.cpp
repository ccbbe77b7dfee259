#include <gtest/gtest.h>

#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "track/writer.h"

namespace {

int64_t zero_clock() { return 0; }

// Host memory running out while a hook appends must not end the program: an exception out of
// append would cross the host's CUDA call or PyTorch's noexcept deleter. In a child with its
// address space capped, the buffer of a writer that never flushes grows until allocation fails.
TEST(ReportWriter, AppendDropsRecordsInsteadOfThrowingWhenHostMemoryRunsOut) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto* w = new memguard::track::ReportWriter(&zero_clock);  // not started: nothing is written out
        const std::string record(1 << 20, 'x');
        rlimit cap{};
        getrlimit(RLIMIT_AS, &cap);
        // The child's current mappings plus about 256 MiB, read from /proc.
        FILE* f = std::fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || std::fscanf(f, "%lu", &pages) != 1) _exit(3);
        std::fclose(f);
        cap.rlim_cur = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (256ul << 20);
        if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(4);
        for (int i = 0; i < 4096 && !w->dropped(); ++i) w->append(record);
        _exit(w->dropped() ? 0 : 5);  // 5: memory never ran out, so the test proved nothing
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace

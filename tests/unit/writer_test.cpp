#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
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

/// The file's text without its heartbeat records (the writer thread adds one whenever it flushes).
std::string read_without_heartbeats(const std::string& path) {
    std::ifstream in(path);
    std::string text, line;
    while (std::getline(in, line))
        if (line.rfind("H ", 0) != 0) text += line + '\n';
    return text;
}

// A packed record's text: "P" and its fields, to check they arrive whole and in order.
void format_fields(const uint64_t* fields, uint32_t count, std::string& out) {
    out += 'P';
    for (uint32_t i = 0; i < count; ++i) out += ' ' + std::to_string(fields[i]);
    out += '\n';
}

// Packed records come out formatted, in the order of appending, between the text records around
// them, whatever their fields hold (bytes that look like newlines or the packed marker included),
// across flushes.
TEST(ReportWriter, PackedRecordsAreFormattedInPlace) {
    char tmpl[] = "/tmp/mg-writer-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string path = std::string(tmpl) + "/r.mgr";
    std::string expect;
    {
        memguard::track::ReportWriter w(&zero_clock);
        std::string error;
        ASSERT_TRUE(w.start(path, &error)) << error;
        const uint64_t tricky[] = {0x0a0a0a0a0a0a0a0aull, 0x0101010101010101ull, 0, ~0ull};
        for (int round = 0; round < 3; ++round) {
            w.append("X first\nX second\n");
            expect += "X first\nX second\n";
            for (uint32_t n : {0u, 1u, 4u, 16u}) {
                uint64_t f[16];
                for (uint32_t i = 0; i < n; ++i) f[i] = tricky[(i + round) % 4] + i;
                w.append_packed(&format_fields, f, n);
                format_fields(f, n, expect);
            }
            w.append("X after\n");
            expect += "X after\n";
            uint64_t one = 0x0a;
            w.append_packed(&format_fields, &one, 1);  // packed records back to back
            w.append_packed(&format_fields, &one, 1);
            format_fields(&one, 1, expect);
            format_fields(&one, 1, expect);
            if (round == 1) w.flush();
        }
        w.finish();
        expect += "Z 0\n";
    }
    EXPECT_EQ(read_without_heartbeats(path), expect);
    std::remove(path.c_str());
    rmdir(tmpl);
}

}  // namespace

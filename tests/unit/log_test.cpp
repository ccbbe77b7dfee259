// The logger: a message is formatted at its call site and written as one line with the prefix; a
// disabled level formats nothing.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/log.h"

namespace memguard {
namespace {

// Runs `body` with stderr sent to a temporary file and returns what was written.
template <typename Body>
std::string stderr_of(Body body) {
    char name[] = "/tmp/memguard-log-test-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    unlink(name);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    body();
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::string text;
    char buf[4096];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    close(fd);
    return text;
}

// Counts how often it was formatted.
struct Counted {
    int* formatted;
};

}  // namespace
}  // namespace memguard

template <>
struct fmt::formatter<memguard::Counted> : fmt::formatter<int> {
    template <typename Context>
    auto format(const memguard::Counted& c, Context& ctx) const {
        return fmt::formatter<int>::format(++*c.formatted, ctx);
    }
};

namespace memguard {
namespace {

TEST(Log, OneLineWithTheLevelsPrefixAndTheArgumentsAsTheyAre) {
    set_log_level(LogLevel::Info);
    const std::string out = stderr_of([] {
        MG_LOG_WARN("block {} of {} bytes", "0x7f{}", 4096);
        MG_LOG_INFO("{:.2f} ms", 1.5);
        MG_LOG_ERROR("plain");
    });
    EXPECT_EQ(out, "memguard: warning: block 0x7f{} of 4096 bytes\n"
                   "memguard: info: 1.50 ms\n"
                   "memguard: error: plain\n");
    set_log_level(LogLevel::Warn);
}

TEST(Log, ADisabledLevelWritesAndFormatsNothing) {
    int formatted = 0;
    set_log_level(LogLevel::Warn);
    EXPECT_FALSE(log_enabled(LogLevel::Debug));
    EXPECT_TRUE(log_enabled(LogLevel::Error));
    std::string out = stderr_of([&] {
        MG_LOG_DEBUG("{}", Counted{&formatted});
        MG_LOG_INFO("{}", Counted{&formatted});
    });
    EXPECT_EQ(out, "");
    EXPECT_EQ(formatted, 0);

    set_log_level(LogLevel::Off);
    out = stderr_of([&] { MG_LOG_ERROR("{}", Counted{&formatted}); });
    EXPECT_EQ(out, "");
    EXPECT_EQ(formatted, 0);

    set_log_level(LogLevel::Debug);
    out = stderr_of([&] { MG_LOG_DEBUG("n={}", Counted{&formatted}); });
    EXPECT_EQ(out, "memguard: debug: n=1\n");
    EXPECT_EQ(formatted, 1);
    set_log_level(LogLevel::Warn);
}

}  // namespace
}  // namespace memguard

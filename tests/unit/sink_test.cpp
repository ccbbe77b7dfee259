// The report file (ReportWriter) and the tests' in-memory sink (MemorySink) given the same records
// write the same report: what the recorder's tests see in memory is what the file would hold.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>

#include "track/packed.h"
#include "track/testing/fake_clock.h"
#include "track/testing/memory_sink.h"
#include "track/writer.h"

namespace memguard::track::testing {
namespace {

/// A packed record whose text is "P <time of its stamp> <its byte count>".
void format_stamped(const unsigned char* payload, uint32_t bytes, memguard::track::PackedOut& out) {
    uint64_t stamp = 0;
    std::memcpy(&stamp, payload, sizeof stamp);
    out.text() += "P " + std::to_string(out.clock.time_of_stamp(stamp)) + " " + std::to_string(bytes) + "\n";
}

/// Everything but heartbeats (the file's writer thread adds one whenever it wakes up to write).
std::string without_heartbeats(const std::string& text) {
    std::istringstream in(text);
    std::string out, line;
    while (std::getline(in, line))
        if (line.rfind("H ", 0) != 0) out += line + '\n';
    return out;
}

/// Drives a sink through one report: the same calls for every sink.
void write_report(EventSink& sink, FakeClock& clock, const std::string& path) {
    std::string error;
    ASSERT_TRUE(sink.start(path, "inside.mgr", "HEADER 1\nI key value\n", &error)) << error;
    EXPECT_EQ(sink.path(), path);
    clock.set(10);
    sink.append("A 1\n");
    sink.append("B 2");  // no newline: the sink ends the line
    const uint64_t stamp = clock.stamp();
    unsigned char payload[24] = {};
    std::memcpy(payload, &stamp, sizeof stamp);
    clock.set(20);
    sink.append_packed(&format_stamped, payload, sizeof payload);
    sink.add_lost(3);
    clock.set(30);
    sink.flush();
    sink.append("C 3\nC 4\n");
    clock.set(40);
    sink.finish();
}

const char kExpected[] = "HEADER 1\nI key value\n"
                         "A 1\nB 2\n"
                         "P 10 24\n"
                         "U 30 20 3\n"
                         "C 3\nC 4\n"
                         "Z 40\n";

TEST(EventSink, TheFileAndTheMemorySinkWriteTheSameReport) {
    char dir[] = "/tmp/mg-sink-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/r.mgr";
    std::string file_text;
    {
        FakeClock clock;
        ReportWriter writer(clock);
        write_report(writer, clock, path);
        std::ifstream in(path);
        std::stringstream s;
        s << in.rdbuf();
        file_text = s.str();
        EXPECT_GT(clock.anchors(), 0) << "packed records are converted after an anchor";
    }
    std::remove(path.c_str());
    rmdir(dir);

    FakeClock clock;
    MemorySink sink(clock);
    write_report(sink, clock, path);
    EXPECT_EQ(sink.report_count(), 1u);
    EXPECT_GT(clock.anchors(), 0);

    EXPECT_EQ(without_heartbeats(file_text), kExpected);
    EXPECT_EQ(without_heartbeats(sink.text()), kExpected);
}

TEST(EventSink, TheMemorySinkKeepsRecordsUntilTheyAreWrittenOut) {
    FakeClock clock;
    MemorySink sink(clock);
    std::string error;
    sink.append("X before\n");  // before the start: written after the header, like the file's buffer
    ASSERT_TRUE(sink.start("/in-memory/r.mgr", "n", "HEADER 1\n", &error));
    sink.append("A 1\n");
    EXPECT_EQ(sink.text(), "HEADER 1\n");
    EXPECT_EQ(sink.pending(), 2u);
    sink.flush();
    EXPECT_EQ(sink.text(), "HEADER 1\nX before\nA 1\nH 0\n");
    sink.flush();  // nothing new: no heartbeat
    EXPECT_EQ(sink.pending(), 0u);
    EXPECT_EQ(sink.text(), "HEADER 1\nX before\nA 1\nH 0\n");
}

TEST(EventSink, AMemorySinkInAForkChildStartsAnotherReport) {
    FakeClock clock;
    MemorySink sink(clock);
    std::string error;
    ASSERT_TRUE(sink.start("/in-memory/parent.mgr", "n", "HEADER 1\n", &error));
    sink.append("A 1\n");
    sink.lock_for_fork();
    sink.unlock_after_fork();
    sink.reset_in_child();
    EXPECT_EQ(sink.path(), "");
    sink.append("A 2\n");
    ASSERT_TRUE(sink.start("/in-memory/child.mgr", "n", "HEADER 1\n", &error));
    sink.finish();
    ASSERT_EQ(sink.report_count(), 2u);
    EXPECT_EQ(sink.text(0), "HEADER 1\n") << "the parent's buffered records stay the parent's";
    EXPECT_EQ(sink.text(1), "HEADER 1\nA 2\nZ 0\n");
    EXPECT_EQ(sink.path_of(1), "/in-memory/child.mgr");
}

TEST(EventSink, AMemorySinkCanRefuseToStart) {
    FakeClock clock;
    MemorySink sink(clock);
    sink.fail_next_start("disk full");
    std::string error;
    EXPECT_FALSE(sink.start("/in-memory/r.mgr", "n", "HEADER 1\n", &error));
    EXPECT_EQ(error, "disk full");
    EXPECT_EQ(sink.report_count(), 0u);
    EXPECT_TRUE(sink.start("/in-memory/r.mgr", "n", "HEADER 1\n", &error));
}

}  // namespace
}  // namespace memguard::track::testing

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "track/packed.h"
#include "track/testing/fake_clock.h"
#include "track/writer.h"

namespace {

// The writers' clock: it stands at 0.
memguard::track::testing::FakeClock zero_clock;

/// A temporary directory for one test's report files, removed with them.
class ReportDir {
public:
    ReportDir() {
        if (mkdtemp(dir_) == nullptr) dir_[0] = '\0';
    }
    ~ReportDir() {
        // Newest first: a file inside a directory goes before the directory.
        for (auto f = files_.rbegin(); f != files_.rend(); ++f) std::remove(f->c_str());
        if (dir_[0]) rmdir(dir_);
    }
    bool ok() const { return dir_[0] != '\0'; }
    std::string file(const std::string& name) {
        files_.push_back(std::string(dir_) + "/" + name);
        return files_.back();
    }

private:
    char dir_[32] = "/tmp/mg-writer-XXXXXX";
    std::vector<std::string> files_;
};

/// In a fork child: caps the address space at what is mapped now plus `extra` bytes (the old
/// limits in *before). False when /proc or setrlimit fails.
bool cap_address_space(unsigned long extra, rlimit* before) {
    getrlimit(RLIMIT_AS, before);
    rlimit cap = *before;
    FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    const bool read = f && std::fscanf(f, "%lu", &pages) == 1;
    if (f) std::fclose(f);
    if (!read) return false;
    cap.rlim_cur = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + extra;
    return setrlimit(RLIMIT_AS, &cap) == 0;
}

/// A writer of a new report file at `path`, with `header`; null (and a failure) when it cannot start.
std::unique_ptr<memguard::track::ReportWriter> started_writer(const std::string& path, const std::string& header = "") {
    auto w = std::make_unique<memguard::track::ReportWriter>(zero_clock);
    std::string error;
    if (!w->start(path, "in-directory.mgr", header, &error)) {
        ADD_FAILURE() << error;
        return nullptr;
    }
    return w;
}

/// Tests that write a report file: `path`, in a directory of their own.
class ReportWriterFile : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(dir.ok());
        path = dir.file("r.mgr");
    }
    ReportDir dir;
    std::string path;
};

/// Waits for a fork child; its exit status, or -1 (and a failure) when a signal ended it.
int wait_child(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Host memory running out while a hook appends must not end the program: an exception out of
// append would cross the host's CUDA call or PyTorch's noexcept deleter. In a child with its
// address space capped, the buffer of a writer that never flushes grows until allocation fails.
TEST(ReportWriter, AppendDropsRecordsInsteadOfThrowingWhenHostMemoryRunsOut) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto* w = new memguard::track::ReportWriter(zero_clock);  // not started: nothing is written out
        const std::string record(1 << 20, 'x');
        rlimit before{};
        if (!cap_address_space(256ul << 20, &before)) _exit(4);
        for (int i = 0; i < 4096 && !w->dropped(); ++i) w->append(record);
        _exit(w->dropped() ? 0 : 5);  // 5: memory never ran out, so the test proved nothing
    }
    EXPECT_EQ(wait_child(pid), 0);
}

/// The file's text without its heartbeat records (the writer thread adds one whenever it flushes).
std::string read_without_heartbeats(const std::string& path) {
    std::ifstream in(path);
    std::string text, line;
    while (std::getline(in, line))
        if (line.rfind("H ", 0) != 0) text += line + '\n';
    return text;
}

// A packed record's text: "P" and its payload's bytes, to check they arrive whole and in order.
void format_bytes_text(const unsigned char* payload, uint32_t bytes, std::string& out) {
    out += 'P';
    for (uint32_t i = 0; i < bytes; ++i) out += ' ' + std::to_string(payload[i]);
    out += '\n';
}
void format_bytes(const unsigned char* payload, uint32_t bytes, memguard::track::PackedOut& out) {
    format_bytes_text(payload, bytes, out.text());
}

// A packed record of 64-bit fields, appended and expected.
void append_fields(memguard::track::ReportWriter& w, const uint64_t* fields, uint32_t count, std::string& expect) {
    w.append_packed(&format_bytes, fields, count * 8);
    format_bytes_text(reinterpret_cast<const unsigned char*>(fields), count * 8, expect);
}

// Packed records come out formatted, in the order of appending, between the text records around
// them, whatever their fields hold (bytes that look like newlines or the packed marker included),
// across flushes.
TEST_F(ReportWriterFile, PackedRecordsAreFormattedInPlace) {
    std::string expect;
    {
        auto writer = started_writer(path);
        ASSERT_TRUE(writer);
        memguard::track::ReportWriter& w = *writer;
        const uint64_t tricky[] = {0x0a0a0a0a0a0a0a0aull, 0x0101010101010101ull, 0, ~0ull};
        for (int round = 0; round < 3; ++round) {
            w.append("X first\nX second\n");
            expect += "X first\nX second\n";
            for (uint32_t n : {0u, 1u, 4u, 16u}) {
                uint64_t f[16];
                for (uint32_t i = 0; i < n; ++i) f[i] = tricky[(i + round) % 4] + i;
                append_fields(w, f, n, expect);
            }
            const unsigned char odd[3] = {'\n', 1, 'T'};  // a payload of any length
            w.append_packed(&format_bytes, odd, 3);
            format_bytes_text(odd, 3, expect);
            w.append("X after\n");
            expect += "X after\n";
            uint64_t one = 0x0a;
            append_fields(w, &one, 1, expect);  // packed records back to back
            append_fields(w, &one, 1, expect);
            if (round == 1) w.flush();
        }
        w.finish();
        expect += "Z 0\n";
    }
    EXPECT_EQ(read_without_heartbeats(path), expect);
}

// Many packed records in a row (more text than the writer formats at once) and a text record
// without its newline (it gets one, so the packed record after it is still recognized).
TEST_F(ReportWriterFile, LongRunsOfPackedRecordsAndUnterminatedText) {
    std::string expect;
    {
        auto writer = started_writer(path);
        ASSERT_TRUE(writer);
        memguard::track::ReportWriter& w = *writer;
        w.append("X no newline");
        expect += "X no newline\n";
        uint64_t f[16];
        for (uint64_t i = 0; i < 20000; ++i) {
            for (uint64_t k = 0; k < 16; ++k) f[k] = ~(i * 16 + k);
            append_fields(w, f, 16, expect);
        }
        w.append("X last\n");
        expect += "X last\n";
        w.finish();
        expect += "Z 0\n";
    }
    EXPECT_TRUE(read_without_heartbeats(path) == expect) << "the file differs from the records appended";
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

constexpr const char* kHeader = "MEMGUARD-REPORT 1\nI format_minor 6\nI pid 7\n";

// The header is in the file when start returns, before any flush: a process that ends with _exit
// at once (records still in the buffer) leaves a file that reads, never an empty one.
TEST_F(ReportWriterFile, TheHeaderIsWrittenWhenTheFileIsCreated) {
    auto writer = started_writer(path, kHeader);
    ASSERT_TRUE(writer);
    EXPECT_EQ(read_all(path), kHeader);
    writer->append("X one\n");
    writer->finish();
    EXPECT_EQ(read_without_heartbeats(path), std::string(kHeader) + "X one\nZ 0\n");
}

TEST_F(ReportWriterFile, UnderscoreExitRightAfterTheFirstRecordLeavesTheHeader) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto* w = new memguard::track::ReportWriter(zero_clock);
        std::string error;
        if (!w->start(path, "in-directory.mgr", kHeader, &error)) _exit(6);
        w->append("A 1 2 7f00 4096 device cudaMalloc 0 - 0\n");
        _exit(0);
    }
    ASSERT_EQ(wait_child(pid), 0);
    // The header is there whether or not the writer thread flushed the record before _exit (it
    // flushes every 250 ms: a slow machine, or a TSan build, can reach that first).
    const std::string content = read_all(path);
    EXPECT_EQ(content.substr(0, std::string(kHeader).size()), kHeader);
    const std::string flushed = std::string(kHeader) + "A 1 2 7f00 4096 device cudaMalloc 0 - 0\n";
    EXPECT_TRUE(content == kHeader || content.rfind(flushed, 0) == 0) << content;
}

// A header that cannot be written leaves no file behind (and the writer does not start).
TEST_F(ReportWriterFile, AHeaderThatCannotBeWrittenLeavesNoFile) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        rlimit small{1, 1};  // the file may hold one byte: the write fails with EFBIG
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &small) != 0) _exit(4);
        memguard::track::ReportWriter w(zero_clock);
        std::string error;
        if (w.start(path, "in-directory.mgr", kHeader, &error)) _exit(5);
        _exit(error.find("cannot write report file") != std::string::npos ? 0 : 7);
    }
    ASSERT_EQ(wait_child(pid), 0);
    struct stat st;
    EXPECT_NE(lstat(path.c_str(), &st), 0) << "the file was left behind";
}

/// Starts a writer at `path` (with `in_directory` as the name inside a directory); the file it
/// created, or "" and *error.
std::string start_at(const std::string& path, const std::string& in_directory, std::string* error) {
    memguard::track::ReportWriter w(zero_clock);
    if (!w.start(path, in_directory, kHeader, error)) return "";
    const std::string created = w.path();
    w.finish();
    return created;
}

// What has the name decides: a regular file, the next free numbered name; a directory, the
// default name inside it (numbered in turn when taken); a device, FIFO or socket, no file at all.
TEST_F(ReportWriterFile, AnExistingRegularFileGetsTheNextNumber) {
    std::ofstream(path) << "someone's\n";
    std::ofstream(dir.file("r.mgr.1")) << "someone's\n";
    std::string error;
    EXPECT_EQ(start_at(path, "in.mgr", &error), path + ".2") << error;
    dir.file("r.mgr.2");
    EXPECT_EQ(read_all(path), "someone's\n");
    EXPECT_EQ(read_all(path + ".1"), "someone's\n");
}

TEST_F(ReportWriterFile, ADirectoryGetsTheNameInside) {
    const std::string d = dir.file("d");
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    std::string error;
    EXPECT_EQ(start_at(d, "in.mgr", &error), d + "/in.mgr") << error;
    EXPECT_EQ(read_all(dir.file("d/in.mgr")), std::string(kHeader) + "Z 0\n");
    EXPECT_EQ(start_at(d + "/", "in.mgr", &error), d + "/in.mgr.1") << error;
    dir.file("d/in.mgr.1");
    struct stat st;
    EXPECT_NE(lstat((d + ".1").c_str(), &st), 0) << "a numbered name beside the directory";
    // The name inside only needs to be free: a directory there is passed over like a file.
    ASSERT_EQ(mkdir(dir.file("d/in2.mgr").c_str(), 0755), 0);
    EXPECT_EQ(start_at(d, "in2.mgr", &error), d + "/in2.mgr.1") << error;
    dir.file("d/in2.mgr.1");
    // A directory that does not exist is not created.
    EXPECT_EQ(start_at(d + "/missing/", "in.mgr", &error), "");
    EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

TEST_F(ReportWriterFile, ADeviceOrAFifoGetsNoFile) {
    struct stat st;
    const bool stale = lstat("/dev/null.1", &st) == 0;  // left by an older memguard
    std::string error;
    EXPECT_EQ(start_at("/dev/null", "in.mgr", &error), "");
    EXPECT_NE(error.find("'/dev/null' is a character device, not a regular file or a directory"), std::string::npos)
        << error;
    if (!stale) EXPECT_NE(lstat("/dev/null.1", &st), 0) << "/dev/null.1 was created";
    const std::string fifo = dir.file("fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(start_at(fifo, "in.mgr", &error), "");
    EXPECT_NE(error.find("is a FIFO"), std::string::npos) << error;
    EXPECT_NE(lstat((fifo + ".1").c_str(), &st), 0);
}

TEST_F(ReportWriterFile, ASymbolicLinkIsRefusedEvenToADirectory) {
    const std::string d = dir.file("d");
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    const std::string link = dir.file("link");
    ASSERT_EQ(symlink(d.c_str(), link.c_str()), 0);
    std::string error;
    EXPECT_EQ(start_at(link, "in.mgr", &error), "");
    EXPECT_NE(error.find("a symbolic link is in the way"), std::string::npos) << error;
    // A numbered name that is a link is refused too.
    std::ofstream(path) << "x\n";
    ASSERT_EQ(symlink(d.c_str(), dir.file("r.mgr.1").c_str()), 0);
    EXPECT_EQ(start_at(path, "in.mgr", &error), "");
    EXPECT_NE(error.find("'" + path + ".1'"), std::string::npos) << error;
    // `link/` names the directory itself.
    EXPECT_EQ(start_at(link + "/", "in.mgr", &error), link + "/in.mgr") << error;
    dir.file("d/in.mgr");
}

// Names in errors are escaped: a path made from the environment cannot break the log line.
TEST_F(ReportWriterFile, ErrorsShowTheNameOnOneLine) {
    std::string error;
    EXPECT_EQ(start_at(path + "\n/missing/x\x1b", "in.mgr", &error), "");
    EXPECT_NE(error.find("r.mgr\\n/missing/x\\x1b'"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
}

/// The counts of the file's U records (records lost) and of its lines starting with `prefix`;
/// also whether a U record comes before the last line, the end record.
struct LostTally {
    uint64_t lost = 0;
    uint64_t lines_with_prefix = 0;
    size_t u_records = 0;
    bool ends_with_z = false;
};

LostTally tally(const std::string& path, char prefix) {
    std::ifstream in(path);
    LostTally t;
    std::string line, last;
    while (std::getline(in, line)) {
        if (line.rfind("U ", 0) == 0) {
            unsigned long long at = 0, since = 0, n = 0;
            if (std::sscanf(line.c_str(), "U %llu %llu %llu", &at, &since, &n) == 3) t.lost += n;
            ++t.u_records;
        } else if (!line.empty() && line[0] == prefix) {
            ++t.lines_with_prefix;
        }
        last = line;
    }
    t.ends_with_z = last.rfind("Z ", 0) == 0;
    return t;
}

// Records dropped for want of memory are counted in the report itself (U records, format minor 6):
// every record appended is either in the file or counted as lost. In a child whose address space
// is capped until appends fail, then restored so the writer can say what it lost.
TEST_F(ReportWriterFile, DroppedRecordsAreCountedInTheReport) {
    const std::string count_path = dir.file("appended");
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto* w = new memguard::track::ReportWriter(zero_clock);
        std::string error;
        if (!w->start(path, "in-directory.mgr", "", &error)) _exit(6);
        std::string record(256 << 10, 'x');
        record.back() = '\n';
        rlimit before{};
        if (!cap_address_space(64ul << 20, &before)) _exit(4);
        unsigned appended = 0;
        for (; appended < 4096 && !w->dropped(); ++appended) w->append(record);
        for (int i = 0; i < 3; ++i, ++appended) w->append(record);  // dropped too, or kept after a flush
        if (setrlimit(RLIMIT_AS, &before) != 0) _exit(7);
        w->flush();
        w->finish();
        FILE* c = std::fopen(count_path.c_str(), "w");
        if (!c || std::fprintf(c, "%u\n", appended) <= 0 || std::fclose(c) != 0) _exit(8);
        _exit(w->dropped() ? 0 : 5);  // 5: memory never ran out, so the test proved nothing
    }
    ASSERT_EQ(wait_child(pid), 0);
    unsigned appended = 0;
    FILE* c = std::fopen(count_path.c_str(), "r");
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(std::fscanf(c, "%u", &appended), 1);
    std::fclose(c);
    const LostTally t = tally(path, 'x');
    EXPECT_GE(t.lost, 1u);
    EXPECT_GE(t.u_records, 1u);
    EXPECT_EQ(t.lines_with_prefix + t.lost, appended) << "kept " << t.lines_with_prefix << ", lost " << t.lost;
    EXPECT_TRUE(t.ends_with_z);
}

// Records lost before the report existed (the recorder's early buffer) are reported the same way.
TEST_F(ReportWriterFile, LostRecordsAddedByTheCallerComeBeforeTheEnd) {
    {
        auto writer = started_writer(path);
        ASSERT_TRUE(writer);
        memguard::track::ReportWriter& w = *writer;
        w.append("X one\n");
        w.add_lost(5);
        w.add_lost(2);
        w.finish();
    }
    EXPECT_EQ(read_without_heartbeats(path), "X one\nU 0 0 7\nZ 0\n");
}

}  // namespace

// A packed record of a thread's number and its sequence number.
static void format_thread_seq(const unsigned char* payload, uint32_t bytes, memguard::track::PackedOut& out) {
    uint32_t f[2] = {0, 0};
    std::memcpy(f, payload, bytes < sizeof f ? bytes : sizeof f);
    out.text() += "P " + std::to_string(f[0]) + ' ' + std::to_string(f[1]) + '\n';
}

// Threads appending at once, packed and text records, while another flushes: every record
// reaches the file once and whole, each thread's in the order it appended them.
TEST_F(ReportWriterFile, ConcurrentAppendsAndFlushesKeepEachThreadsRecordsInOrder) {
    constexpr uint32_t kThreads = 6, kRecords = 30000;
    {
        auto writer = started_writer(path);
        ASSERT_TRUE(writer);
        memguard::track::ReportWriter& w = *writer;
        std::atomic<bool> done{false};
        std::thread flusher([&] {
            while (!done.load()) {
                w.flush();
                std::this_thread::yield();
            }
        });
        std::vector<std::thread> threads;
        for (uint32_t t = 0; t < kThreads; ++t) {
            threads.emplace_back([&w, t] {
                for (uint32_t i = 0; i < kRecords; ++i) {
                    if (i % 7 == 0) {
                        w.append("X " + std::to_string(t) + ' ' + std::to_string(i) + '\n');
                    } else {
                        const uint32_t f[2] = {t, i};
                        w.append_packed(&format_thread_seq, f, sizeof f);
                    }
                }
            });
        }
        for (std::thread& th : threads) th.join();
        done = true;
        flusher.join();
        w.finish();
    }
    std::ifstream in(path);
    std::vector<int64_t> last(kThreads, -1);
    uint64_t records = 0;
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("H ", 0) == 0 || line == "Z 0") continue;
        char kind = 0;
        unsigned t = 0, i = 0;
        ASSERT_EQ(std::sscanf(line.c_str(), "%c %u %u", &kind, &t, &i), 3) << line;
        ASSERT_TRUE(kind == 'P' || kind == 'X') << line;
        ASSERT_LT(t, kThreads) << line;
        ASSERT_EQ(kind == 'X', i % 7 == 0) << line;
        ASSERT_EQ(static_cast<int64_t>(i), last[t] + 1) << "thread " << t << " out of order or lost: " << line;
        last[t] = i;
        ++records;
    }
    EXPECT_EQ(records, uint64_t{kThreads} * kRecords);
}

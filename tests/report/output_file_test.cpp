// The output files of `plot` and `export` (issue 17 items 1, 2 and 10): never written through a
// symbolic link someone planted, "-" for standard output, devices and FIFOs written in place and
// never replaced, other kinds of file refused, mode 0640 less the umask.
//
// The tests run as root in CI, where replacing a device node by mistake would succeed: no test
// names a node of the real /dev unless /dev is not writable; as root each uses its own copy, made
// with mknod in a temporary directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>
#include <vector>

#include "test_util.h"

namespace memguard::report {
namespace {

using test::contains;
using test::read_file;

const std::string kGolden = MEMGUARD_GOLDEN_DIR;
const std::string kTrain = kGolden + "/train.mgr";

struct ShellRun {
    int rc = -1;
    std::string out, err;
};

/// Runs `sh -c SCRIPT` in `dir`, where $MG is the CLI (test::cli_path) and $TRAIN a golden report;
/// stdout and stderr apart.
ShellRun sh(const test::TempDir& dir, const std::string& script) {
    std::string out = dir.path() + "/.stdout", err = dir.path() + "/.stderr";
    std::string cmd = "cd '" + dir.path() + "' && MG='" + test::cli_path() + "' TRAIN='" + kTrain + "' sh -c '" +
                      script + "' >'" + out + "' 2>'" + err + "'";
    int status = std::system(cmd.c_str());
    ShellRun r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    unlink(out.c_str());
    unlink(err.c_str());
    return r;
}

/// The names in a directory, sorted.
std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            std::string n = e->d_name;
            if (n != "." && n != "..") out.push_back(n);
        }
        closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

struct stat lstat_of(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) st.st_mode = 0;
    return st;
}

/// What `export --perfetto` of train.mgr writes into a regular file.
std::string perfetto_of_train() {
    test::TempDir dir;
    ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o ref.json");
    EXPECT_EQ(r.rc, 0) << r.err;
    return read_file(dir.path() + "/ref.json");
}

/// A character device `major:minor` to write to: as root a node made in `dir` (the real one could
/// be replaced by a wrong rename), else the real `dev_path` when /dev is not writable. "" to skip.
std::string device_node(const test::TempDir& dir, const char* name, unsigned major_no, unsigned minor_no,
                        const char* dev_path) {
    if (::geteuid() == 0) {
        std::string p = dir.path() + "/" + name;
        if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(major_no, minor_no)) != 0) return "";  // no CAP_MKNOD
        int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return "";  // a file system mounted nodev
        ::close(fd);
        return p;
    }
    if (::access("/dev", W_OK) != 0 && ::access(dev_path, W_OK) == 0) return dev_path;
    return "";
}

bool is_char_device(const std::string& path, unsigned major_no, unsigned minor_no) {
    struct stat st = lstat_of(path);
    return S_ISCHR(st.st_mode) && major(st.st_rdev) == major_no && minor(st.st_rdev) == minor_no;
}

// Issue 17 item 1: the temporary file had the name OUT.tmp.<pid>, opened with fopen("wb"), so a
// symbolic link planted there (or at any name the CLI might choose) wrote the output into the file
// it pointed to, and the rename then put the link at OUT.
TEST(OutputFile, NeverWritesThroughAPlantedSymlink) {
    for (const char* cmd :
         {"export --perfetto $TRAIN -o out.json", "plot $TRAIN -o out.svg", "export --memory-viz $TRAIN -o out.json"}) {
        test::TempDir dir;
        std::string victim = dir.write("victim", "precious\n");
        std::string out = std::string(cmd).find("out.svg") != std::string::npos ? "out.svg" : "out.json";
        // The old name, for this very process ($$ becomes the CLI's pid through exec), the pids
        // after it and other names a writer might guess.
        std::string plant = "for n in $$ $(seq $(($$ + 1)) $(($$ + 40))); do ln -s victim " + out +
                            ".tmp.$n; done; for n in " + out + ".tmp ." + out + ".tmp " + out + "~ " + out + ".new " +
                            out + ".part; do ln -s victim $n; done; ";
        ShellRun r = sh(dir, plant + "exec $MG " + cmd);
        ASSERT_EQ(r.rc, 0) << cmd << ": " << r.err;
        EXPECT_EQ(read_file(victim), "precious\n") << cmd;
        struct stat st = lstat_of(dir.path() + "/" + out);
        EXPECT_TRUE(S_ISREG(st.st_mode)) << cmd << ": " << out << " is not a regular file";
        EXPECT_GT(st.st_size, 100) << cmd;
        // Every planted link is still there and still a link; nothing else was left behind.
        std::vector<std::string> names = names_in(dir.path());
        for (const std::string& n : names) {
            if (n == "victim" || n == out) continue;
            EXPECT_TRUE(S_ISLNK(lstat_of(dir.path() + "/" + n).st_mode)) << cmd << ": " << n;
        }
        EXPECT_EQ(names.size(), 2u + 41u + 5u) << cmd;
    }
}

// A symbolic link at OUT itself is replaced, not followed, when it names a regular file: the file
// it pointed to is left alone. One to nothing, to a device or to a FIFO is refused: placed in a
// shared directory, it could send the output anywhere (/dev/port, a FIFO another user reads).
TEST(OutputFile, ASymlinkAtTheOutputNameIsReplacedNotFollowed) {
    test::TempDir dir;
    std::string victim = dir.write("victim", "precious\n");
    ShellRun r = sh(dir, "ln -s victim out.json && $MG export --perfetto $TRAIN -o out.json");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(read_file(victim), "precious\n");
    EXPECT_TRUE(S_ISREG(lstat_of(dir.path() + "/out.json").st_mode));
}

TEST(OutputFile, ASymlinkToNothingADeviceOrAFifoIsRefused) {
    test::TempDir dir;
    ASSERT_EQ(::mkfifo((dir.path() + "/fifo").c_str(), 0600), 0);
    std::string null = device_node(dir, "null", 1, 3, "/dev/null");
    std::vector<std::pair<std::string, std::string>> links = {{"nowhere", "nothing"}, {"fifo", "a FIFO"}};
    if (!null.empty()) links.emplace_back(null, "a character device");
    for (const auto& [target, kind] : links) {
        ASSERT_EQ(::symlink(target.c_str(), (dir.path() + "/out.json").c_str()), 0);
        ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o out.json");
        EXPECT_EQ(r.rc, 2) << target;
        EXPECT_EQ(r.err, "memguard: error: out.json: cannot write: it is a symbolic link to " + kind +
                             " (give a file name, a character device, a FIFO or '-' for standard output)\n");
        EXPECT_TRUE(S_ISLNK(lstat_of(dir.path() + "/out.json").st_mode)) << target << ": the link was replaced";
        ::unlink((dir.path() + "/out.json").c_str());
    }
    EXPECT_TRUE(S_ISFIFO(lstat_of(dir.path() + "/fifo").st_mode));
    if (!null.empty()) {
        EXPECT_TRUE(is_char_device(null, 1, 3));
    }
}

// Another user's FIFO at the name (anyone may make one in a shared directory) would receive the
// report's data: refused, without opening it.
TEST(OutputFile, AFifoOfAnotherUserIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a FIFO to another user";
    test::TempDir dir;
    std::string fifo = dir.path() + "/out.json";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
    ASSERT_EQ(::chown(fifo.c_str(), 65534, 65534), 0);
    ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o out.json");  // would wait for a reader if it opened it
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "memguard: error: out.json: cannot write: it is a FIFO of another user (uid 65534) (give a file "
                     "name, a character device, a FIFO or '-' for standard output)\n");
    EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));
}

// Issue 17 item 2: "-o -" wrote a file named "-"; now the output is standard output, alone: the
// status line goes to stderr.
TEST(OutputFile, DashIsStandardOutput) {
    const std::string ref = perfetto_of_train();
    test::TempDir dir;
    ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o -");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, ref);
    EXPECT_EQ(r.err.rfind("wrote standard output: Chrome trace (open it at https://ui.perfetto.dev), ", 0), 0u)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    ShellRun plot = sh(dir, "$MG plot $TRAIN -o -");
    ASSERT_EQ(plot.rc, 0) << plot.err;
    EXPECT_EQ(plot.out.rfind("<svg xmlns=", 0), 0u) << plot.out.substr(0, 100);
    EXPECT_TRUE(plot.out.size() > 7 && plot.out.compare(plot.out.size() - 7, 7, "</svg>\n") == 0);
    EXPECT_EQ(plot.err, "wrote standard output\n");
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{}) << "a file was created";
}

// A path that names this process's standard output (as /dev/stdout does, through /proc/self/fd/1)
// is written there, and the status line goes to stderr. Tested through a link of our own to
// /proc/self/fd/1, not /dev/stdout: as root, a rename over /dev/stdout would succeed.
TEST(OutputFile, APathToStandardOutputWritesThere) {
    const std::string ref = perfetto_of_train();
    test::TempDir dir;
    ASSERT_EQ(::symlink("/proc/self/fd/1", (dir.path() + "/stdout").c_str()), 0);
    // stdout a pipe, then a regular file.
    ShellRun pipe = sh(dir, "$MG export --perfetto $TRAIN -o stdout | cat");
    ASSERT_EQ(pipe.rc, 0) << pipe.err;
    EXPECT_EQ(pipe.out, ref);
    EXPECT_EQ(pipe.err.rfind("wrote stdout: Chrome trace (open it at https://ui.perfetto.dev), ", 0), 0u) << pipe.err;
    EXPECT_EQ(std::count(pipe.err.begin(), pipe.err.end(), '\n'), 1) << pipe.err;
    ShellRun file = sh(dir, "$MG export --perfetto $TRAIN -o stdout");
    ASSERT_EQ(file.rc, 0) << file.err;
    EXPECT_EQ(file.out, ref);
    EXPECT_TRUE(contains(file.err, "wrote stdout: ")) << file.err;
    EXPECT_TRUE(S_ISLNK(lstat_of(dir.path() + "/stdout").st_mode)) << "the link was replaced";
}

// /dev/null: written in place. It was renamed over, which as root replaced the device node with a
// regular file.
TEST(OutputFile, ACharacterDeviceIsWrittenInPlace) {
    test::TempDir dir;
    std::string null = device_node(dir, "null", 1, 3, "/dev/null");
    if (null.empty()) GTEST_SKIP() << "no /dev/null to test with: not root (or no mknod) and /dev is writable";
    ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o " + null + " && $MG export --memory-viz $TRAIN -o " + null);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(is_char_device(null, 1, 3)) << null << " is no longer the device";
    EXPECT_TRUE(contains(r.out, "wrote " + null + ": Chrome trace")) << r.out;
    EXPECT_TRUE(contains(r.out, "wrote " + null + ": memory snapshot")) << r.out;
}

// /dev/full: the write error names the file, in one line; the node stays.
TEST(OutputFile, AWriteErrorOfADeviceIsOneClearLine) {
    test::TempDir dir;
    std::string full = device_node(dir, "full", 1, 7, "/dev/full");
    if (full.empty()) GTEST_SKIP() << "no /dev/full to test with: not root (or no mknod) and /dev is writable";
    ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o " + full);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "memguard: error: " + full + ": cannot write: No space left on device\n");
    EXPECT_TRUE(is_char_device(full, 1, 7)) << full << " is no longer the device";
}

TEST(OutputFile, AFifoIsWrittenInPlace) {
    const std::string ref = perfetto_of_train();
    test::TempDir dir;
    std::string fifo = dir.path() + "/fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::string got;
    std::thread reader([&] { got = read_file(fifo); });
    ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o fifo");
    // Should the CLI never have opened the FIFO, the reader still waits for a writer: end it.
    int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w >= 0) ::close(w);
    reader.join();
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(got, ref);
    EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode)) << "the FIFO was replaced";
}

// plot refused every name not ending in .svg or .html but '-' (its "name rule", checked before
// write_output_file), so `plot -o /dev/null` and a FIFO failed. They are written in place as SVG;
// --format chooses when the name says nothing, and must not contradict a name that does.
TEST(OutputFile, PlotWritesToDevicesAndFifos) {
    test::TempDir dir;
    std::string null = device_node(dir, "null", 1, 3, "/dev/null");
    if (!null.empty()) {
        ShellRun r = sh(dir, "$MG plot $TRAIN -o " + null + " && $MG plot $TRAIN -o " + null + " --format html");
        EXPECT_EQ(r.rc, 0) << r.err;
        EXPECT_EQ(r.out, "wrote " + null + "\nwrote " + null + "\n");
        EXPECT_TRUE(is_char_device(null, 1, 3)) << null << " is no longer the device";
        ::unlink(null.c_str());
    }
    std::string fifo = dir.path() + "/fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    for (const char* format : {"", " --format html", " --format=svg"}) {
        std::string got;
        std::thread reader([&] { got = read_file(fifo); });
        ShellRun r = sh(dir, std::string("$MG plot $TRAIN -o fifo") + format);
        int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ends a reader still waiting
        if (w >= 0) ::close(w);
        reader.join();
        EXPECT_EQ(r.rc, 0) << format << ": " << r.err;
        EXPECT_EQ(r.out, "wrote fifo\n") << format;
        const bool html = std::string(format) == " --format html";
        EXPECT_EQ(got.rfind(html ? "<!DOCTYPE html>\n" : "<svg xmlns=", 0), 0u) << format << ": " << got.substr(0, 100);
        EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode)) << "the FIFO was replaced";
    }
    ShellRun dash = sh(dir, "$MG plot $TRAIN -o - --format html");
    EXPECT_EQ(dash.rc, 0) << dash.err;
    EXPECT_EQ(dash.out.rfind("<!DOCTYPE html>\n", 0), 0u) << dash.out.substr(0, 100);
    // A regular file whose name says nothing: --format chooses, else it is refused.
    ShellRun named = sh(dir, "$MG plot $TRAIN -o picture --format svg");
    EXPECT_EQ(named.rc, 0) << named.err;
    EXPECT_EQ(read_file(dir.path() + "/picture").rfind("<svg xmlns=", 0), 0u);
    ShellRun none = sh(dir, "$MG plot $TRAIN -o other");
    EXPECT_EQ(none.rc, 2);
    EXPECT_EQ(none.err.rfind("memguard: error: bad output name 'other' for plot: give a name ending in .svg or "
                             ".html, '-', a device or a FIFO, or --format svg|html\n",
                             0),
              0u)
        << none.err;
    ShellRun contradicts = sh(dir, "$MG plot $TRAIN -o x.svg --format html");
    EXPECT_EQ(contradicts.rc, 2);
    EXPECT_EQ(contradicts.err.rfind("memguard: error: --format html but the output name 'x.svg' ends in .svg\n", 0), 0u)
        << contradicts.err;
    ShellRun bad = sh(dir, "$MG plot $TRAIN -o - --format png");
    EXPECT_EQ(bad.rc, 2);
    EXPECT_EQ(bad.err.rfind("memguard: error: bad value 'png' for --format: expected svg or html\n", 0), 0u) << bad.err;
    EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"fifo", "picture"}));
}

// A directory, a socket: refused with one line, left as they were (a socket used to be renamed
// over).
// `export --text|--binary` writes the records out as they are made (memory bounded whatever the
// report's size): a report that turns out bad past the first megabyte of output leaves an
// existing file as it was and no temporary file.
TEST(OutputFile, AnExportThatFailsMidwayLeavesTheFileAsItWas) {
    test::TempDir dir;
    std::string body = "MEMGUARD-REPORT 1\nI format_minor 0\n";
    for (int i = 0; i < 40000; ++i) {
        body += "A " + std::to_string(i + 1) + " 1 " + std::to_string(0x100000 + i) + " 4096 device cudaMalloc 0 - 0\n";
    }
    body += "A 999999 1 zz 4096 device cudaMalloc 0 - 0\n";  // a bad address: the report stops here
    dir.write("bad.mgr", body);
    dir.write("out.mgr", "kept\n");
    ShellRun r = sh(dir, "$MG export --text bad.mgr -o out.mgr");
    EXPECT_NE(r.rc, 0);
    EXPECT_TRUE(contains(r.err, "bad.mgr")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(read_file(dir.path() + "/out.mgr"), "kept\n");
    EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"bad.mgr", "out.mgr"}));
    // The same report cut before its bad record exports whole, past one chunk of output.
    dir.write("bad.mgr", body.substr(0, body.rfind("A 999999")));
    ShellRun ok = sh(dir, "$MG export --text bad.mgr -o out.mgr");
    ASSERT_EQ(ok.rc, 0) << ok.err;
    EXPECT_GT(read_file(dir.path() + "/out.mgr").size(), size_t{1} << 20);
}

TEST(OutputFile, OtherKindsOfFileAreRefused) {
    test::TempDir dir;
    std::string sub = dir.path() + "/d";
    ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
    std::string sock = dir.path() + "/sock";
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    ASSERT_LT(sock.size(), sizeof addr.sun_path);
    std::copy(sock.begin(), sock.end(), addr.sun_path);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);
    for (const auto& [target, kind] : {std::pair{std::string("d"), "a directory"}, {std::string("sock"), "a socket"}}) {
        ShellRun r = sh(dir, "$MG export --perfetto $TRAIN -o " + target);
        EXPECT_EQ(r.rc, 2) << target;
        EXPECT_EQ(r.err, "memguard: error: " + target + ": cannot write: it is " + kind +
                             " (give a file name, a character device, a FIFO or '-' for standard output)\n");
    }
    EXPECT_TRUE(S_ISDIR(lstat_of(sub).st_mode));
    EXPECT_EQ(names_in(sub), std::vector<std::string>{});
    EXPECT_TRUE(S_ISSOCK(lstat_of(sock).st_mode)) << "the socket was replaced";
    EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"d", "sock"}));
    ::rmdir(sub.c_str());
}

// Issue 17 item 10: plot and export files are 0640 less the umask, as the reports are (they were
// 0666 less the umask); a file replaced gets the new mode too.
TEST(OutputFile, FilesAreNotWorldReadable) {
    test::TempDir dir;
    dir.write("old.json", "x");
    ::chmod((dir.path() + "/old.json").c_str(), 0666);
    ShellRun r = sh(dir, "umask 022 && $MG export --perfetto $TRAIN -o a.json && $MG plot $TRAIN -o a.svg && "
                         "$MG export --perfetto $TRAIN -o old.json && umask 077 && $MG plot $TRAIN -o b.html && "
                         "umask 0 && $MG export --memory-viz $TRAIN -o c.pickle");
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const auto& [name, mode] :
         {std::pair{"a.json", 0640}, {"a.svg", 0640}, {"old.json", 0640}, {"b.html", 0600}, {"c.pickle", 0640}}) {
        EXPECT_EQ(lstat_of(dir.path() + "/" + name).st_mode & 07777, static_cast<mode_t>(mode)) << name;
    }
}

}  // namespace
}  // namespace memguard::report

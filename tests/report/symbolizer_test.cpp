// The symbolizer on real ELF files: the symtest library (built -O0 -g), a stripped copy of it, and
// this test executable. The instruction pointers are return addresses recorded at run time.
#include <ftw.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>

#include "loaded_module.h"
#include "report/elf_file.h"
#include "report/subprocess.h"
#include "report/symbolizer.h"
#include "symtest_lib.h"
#include "test_util.h"

namespace {
int g_exe_line = 0;
void* g_exe_ip = nullptr;
__attribute__((noinline)) void exe_recorder() { g_exe_ip = __builtin_return_address(0); }
}  // namespace

// Outside every namespace so that its demangled name is simply "exe_function()". As in symtest_lib.cpp,
// the return address of the recorder call belongs to the next line.
// The __LINE__ statement shares its line with the call it names:
// clang-format off
static __attribute__((noinline)) void* exe_function() {
    volatile int keep = 1;
    g_exe_line = __LINE__; exe_recorder();
    keep = keep + 1;
    return keep != 0 ? g_exe_ip : nullptr;
}
// clang-format on

namespace memguard::report {
namespace {

using test::contains;
using test::LoadedModule;

/// A report with one module and one stack holding `ip`.
Report report_for(const LoadedModule& m, uint64_t ip, const std::string* build_id = nullptr,
                  const std::string* path = nullptr) {
    char s[64];
    std::snprintf(s, sizeof s, "S 1 %llx\n", static_cast<unsigned long long>(ip));
    std::string content = test::kHeader + m.m_record(0, build_id, path) + s +
                          "A 1 1 7f00 16 device cudaMalloc 0 - 1\nZ 2\n";
    return parse_report(content, "sym.mgr");
}

struct Probe {
    uint64_t ip;
    LoadedModule module;
};

Probe probe(void* ip) {
    auto m = test::module_of(ip);
    if (!m) throw std::runtime_error("no module holds the probe address");
    return Probe{reinterpret_cast<uint64_t>(ip), *m};
}

bool have_addr2line() { return !find_program("addr2line").empty(); }

std::string base_name(const std::string& p) { return p.substr(p.rfind('/') + 1); }

Frame only_frame(const Report& r, SymbolizerOptions options = {}) {
    Symbolizer sym(r, options);
    std::vector<Frame> frames = sym.frames(r.stacks.at(1), 10);
    if (frames.size() != 1) throw std::runtime_error("expected one frame");
    return frames[0];
}

TEST(Symbolizer, SharedLibraryFunctionAndLine) {
    Probe p = probe(memguard_symtest::known_function(3));
    EXPECT_EQ(base_name(p.module.path), "libmemguard_symtest.so");
    ASSERT_FALSE(p.module.build_id.empty()) << "the toolchain should emit a GNU build-id";
    Report r = report_for(p.module, p.ip);
    Frame f = only_frame(r);
    ASSERT_NE(f.module, nullptr);
    EXPECT_EQ(f.module->path, p.module.path);
    EXPECT_EQ(f.offset, p.ip - p.module.bias);
    EXPECT_EQ(f.function, "memguard_symtest::known_function(int)");
    if (!have_addr2line()) GTEST_SKIP() << "addr2line not on PATH: file:line not checked";
    EXPECT_EQ(base_name(f.file), "symtest_lib.cpp");
    EXPECT_EQ(f.line, memguard_symtest::known_call_line());
    EXPECT_TRUE(f.inlined_by.empty());
}

TEST(Symbolizer, WithoutAddr2lineNamesComeFromTheSymbolTable) {
    Probe p = probe(memguard_symtest::known_function(3));
    SymbolizerOptions no_lines;
    no_lines.addr2line = "";
    Frame f = only_frame(report_for(p.module, p.ip), no_lines);
    EXPECT_EQ(f.function, "memguard_symtest::known_function(int)");
    EXPECT_EQ(f.file, "");
    EXPECT_EQ(f.line, 0);
}

TEST(Symbolizer, HiddenFunctionFromSymtab) {
    Probe p = probe(memguard_symtest::call_hidden_function(4));
    SymbolizerOptions no_lines;
    no_lines.addr2line = "";
    EXPECT_EQ(only_frame(report_for(p.module, p.ip), no_lines).function, "memguard_symtest::hidden_function(int)");
}

TEST(Symbolizer, StrippedCopyFallsBackToDynsym) {
    std::string stripped = MEMGUARD_SYMTEST_STRIPPED;
    struct stat st {};
    if (stripped.empty() || stat(stripped.c_str(), &st) != 0) GTEST_SKIP() << "no strip tool: no stripped copy";
    std::string error;
    auto elf = ElfFile::open(stripped, error);
    ASSERT_TRUE(elf) << error;
    EXPECT_FALSE(elf->has_symtab());
    EXPECT_FALSE(elf->has_debug_line());

    Probe known = probe(memguard_symtest::known_function(3));
    Frame f = only_frame(report_for(known.module, known.ip, nullptr, &stripped));
    EXPECT_EQ(f.function, "memguard_symtest::known_function(int)");  // exported: in .dynsym
    EXPECT_EQ(f.file, "");                                           // no DWARF in the copy

    Probe hidden = probe(memguard_symtest::call_hidden_function(3));
    Frame h = only_frame(report_for(hidden.module, hidden.ip, nullptr, &stripped));
    EXPECT_EQ(h.function, "");  // hidden: only the stripped .symtab had it
    ASSERT_NE(h.module, nullptr);
    EXPECT_EQ(h.offset, hidden.ip - hidden.module.bias);
}

TEST(Symbolizer, InlinedFrames) {
    Probe p = probe(memguard_symtest::outer_function(5));
    SymbolizerOptions no_lines;
    no_lines.addr2line = "";
    EXPECT_EQ(only_frame(report_for(p.module, p.ip), no_lines).function, "memguard_symtest::outer_function(int)");
    if (!have_addr2line()) GTEST_SKIP() << "addr2line not on PATH";
    Frame f = only_frame(report_for(p.module, p.ip));
    EXPECT_EQ(f.function, "memguard_symtest::inlined_helper(int)");
    EXPECT_EQ(base_name(f.file), "symtest_lib.cpp");
    EXPECT_EQ(f.line, memguard_symtest::inlined_call_line());
    ASSERT_EQ(f.inlined_by.size(), 1u);
    EXPECT_EQ(f.inlined_by[0].function, "memguard_symtest::outer_function(int)");
    EXPECT_EQ(f.inlined_by[0].line, memguard_symtest::outer_call_line());
}

TEST(Symbolizer, TheExecutableItself) {
    Probe p = probe(exe_function());
    EXPECT_EQ(base_name(p.module.path), "memguard_report_tests");
    Frame f = only_frame(report_for(p.module, p.ip));
    EXPECT_EQ(f.function, "exe_function()");
    if (!have_addr2line()) GTEST_SKIP() << "addr2line not on PATH";
    EXPECT_EQ(base_name(f.file), "symbolizer_test.cpp");
    EXPECT_EQ(f.line, g_exe_line);
}

TEST(Symbolizer, DifferentBuildIdIsNotSymbolized) {
    Probe p = probe(memguard_symtest::known_function(3));
    std::string other = "00112233445566778899aabbccddeeff00112233";
    ASSERT_NE(other, p.module.build_id);
    Report r = report_for(p.module, p.ip, &other);
    Symbolizer sym(r);
    Frame f = sym.frame(p.ip, 1);
    EXPECT_EQ(f.function, "");
    EXPECT_EQ(f.file, "");
    ASSERT_NE(f.module, nullptr);
    EXPECT_EQ(f.offset, p.ip - p.module.bias);
    sym.frame(p.ip, 1);  // the warning comes once per module
    std::vector<std::string> w = sym.take_warnings();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_TRUE(
        contains(w[0], p.module.path + ": GNU build-id " + p.module.build_id + " differs from the recorded " + other));
    EXPECT_TRUE(sym.take_warnings().empty());
}

TEST(Symbolizer, AbsentRecordedBuildIdStillSymbolizes) {
    Probe p = probe(memguard_symtest::known_function(3));
    std::string none;
    EXPECT_EQ(only_frame(report_for(p.module, p.ip, &none)).function, "memguard_symtest::known_function(int)");
}

TEST(Symbolizer, MissingFileIsQuietlyNotSymbolized) {
    Probe p = probe(memguard_symtest::known_function(3));
    std::string missing = "/nonexistent-memguard-dir/libmemguard_symtest.so";
    Report r = report_for(p.module, p.ip, nullptr, &missing);
    Symbolizer sym(r);
    Frame f = sym.frames(r.stacks.at(1), 1).at(0);
    EXPECT_EQ(f.function, "");
    EXPECT_EQ(f.module->path, missing);
    EXPECT_TRUE(sym.take_warnings().empty());
}

TEST(Symbolizer, NonElfFileWarns) {
    test::TempDir dir;
    std::string fake = dir.write("libfake.so", "this is not an ELF file, just some text of sufficient length......");
    Report r = parse_report(test::kHeader + "M 0 1000 2000 0 - " + fake + "\nS 1 1100\nZ 1\n", "x.mgr");
    Symbolizer sym(r);
    EXPECT_EQ(sym.frame(0x1100, 1).function, "");
    std::vector<std::string> w = sym.take_warnings();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_TRUE(contains(w[0], fake + ": cannot read (not an ELF64")) << w[0];
}

TEST(Symbolizer, Addr2lineRunsOncePerModule) {
    std::string real = find_program("addr2line");
    if (real.empty()) GTEST_SKIP() << "addr2line not on PATH";
    test::TempDir dir;
    std::string log = dir.path() + "/calls.log";
    std::string wrapper = dir.write("a2l.sh", "#!/bin/sh\necho run >> '" + log + "'\nexec '" + real + "' \"$@\"\n");
    chmod(wrapper.c_str(), 0755);

    Probe known = probe(memguard_symtest::known_function(1));
    Probe hidden = probe(memguard_symtest::call_hidden_function(1));
    Probe outer = probe(memguard_symtest::outer_function(1));
    char stacks[256];
    std::snprintf(stacks, sizeof stacks, "S 1 %llx %llx\nS 2 %llx\n", static_cast<unsigned long long>(known.ip),
                  static_cast<unsigned long long>(hidden.ip), static_cast<unsigned long long>(outer.ip));
    Report r = parse_report(test::kHeader + known.module.m_record(0) + stacks + "Z 1\n", "x.mgr");
    SymbolizerOptions options;
    options.addr2line = wrapper;
    Symbolizer sym(r, options);
    sym.prepare({&r.stacks.at(1), &r.stacks.at(2)}, 6);
    std::vector<Frame> f1 = sym.frames(r.stacks.at(1), 6);
    std::vector<Frame> f2 = sym.frames(r.stacks.at(2), 6);
    EXPECT_EQ(test::read_file(log), "run\n");
    ASSERT_EQ(f1.size(), 2u);
    EXPECT_EQ(f1[0].line, memguard_symtest::known_call_line());
    EXPECT_EQ(f1[1].function, "memguard_symtest::hidden_function(int)");
    EXPECT_NE(f1[1].line, 0);
    EXPECT_EQ(f2.at(0).line, memguard_symtest::inlined_call_line());
    EXPECT_TRUE(sym.take_warnings().empty());
}

TEST(Symbolizer, FailingAddr2lineWarnsAndKeepsSymbolNames) {
    test::TempDir dir;
    std::string wrapper = dir.write("bad.sh", "#!/bin/sh\ncat >/dev/null\nexit 3\n");
    chmod(wrapper.c_str(), 0755);
    Probe p = probe(memguard_symtest::known_function(2));
    Report r = report_for(p.module, p.ip);
    SymbolizerOptions options;
    options.addr2line = wrapper;
    Frame f = only_frame(r, options);
    EXPECT_EQ(f.function, "memguard_symtest::known_function(int)");
    EXPECT_EQ(f.line, 0);
}

TEST(Symbolizer, ModuleLookupPrefersModulesKnownWhenTheStackWasWritten) {
    Report r = parse_report(test::kHeader + "M 0 1000 2000 0 - /old.so\nS 1 1100\nM 1 1000 2000 0 - /new.so\n"
                                            "S 2 1100\nM 2 3000 4000 0 - /late.so\nS 3 3100 9000\nZ 1\n",
                            "x.mgr");
    Symbolizer sym(r);
    EXPECT_EQ(sym.find_module(0x1100, r.stacks.at(1).modules_known)->path, "/old.so");
    EXPECT_EQ(sym.find_module(0x1100, r.stacks.at(2).modules_known)->path, "/new.so");
    EXPECT_EQ(sym.find_module(0x1100, 0)->path, "/new.so");   // no information: the latest
    EXPECT_EQ(sym.find_module(0x3100, 1)->path, "/late.so");  // announced after the stack: tolerated
    EXPECT_EQ(sym.find_module(0x2000, 3), nullptr);           // ranges are half-open
    std::vector<Frame> f = sym.frames(r.stacks.at(3), 5);
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0].offset, 0x3100u);
    EXPECT_EQ(f[1].module, nullptr);
    EXPECT_EQ(f[1].ip, 0x9000u);
    EXPECT_EQ(sym.frames(r.stacks.at(3), 1).size(), 1u);
}

TEST(Addr2line, OutputParsing) {
    std::string out = "0x0000000000001139\nfoo(int)\n/src/a.cpp:12\n"
                      "0x0000000000002000\ninner()\n/src/h.h:3 (discriminator 2)\nouter()\n/src/b.cpp:40\n"
                      "0x0000000000003000\n??\n??:0\n"
                      "0x0000000000004000\nbar\n/src/c.c:?\n";
    auto m = parse_addr2line_output(out);
    ASSERT_EQ(m.size(), 4u);
    ASSERT_EQ(m.at(0x1139).size(), 1u);
    EXPECT_EQ(m.at(0x1139)[0].function, "foo(int)");
    EXPECT_EQ(m.at(0x1139)[0].file, "/src/a.cpp");
    EXPECT_EQ(m.at(0x1139)[0].line, 12);
    ASSERT_EQ(m.at(0x2000).size(), 2u);
    EXPECT_EQ(m.at(0x2000)[0].file, "/src/h.h");
    EXPECT_EQ(m.at(0x2000)[0].line, 3);
    EXPECT_EQ(m.at(0x2000)[1].function, "outer()");
    EXPECT_EQ(m.at(0x2000)[1].line, 40);
    EXPECT_EQ(m.at(0x3000)[0].function, "");
    EXPECT_EQ(m.at(0x3000)[0].file, "");
    EXPECT_EQ(m.at(0x3000)[0].line, 0);
    EXPECT_EQ(m.at(0x4000)[0].file, "/src/c.c");
    EXPECT_EQ(m.at(0x4000)[0].line, 0);
}

TEST(Demangle, Names) {
    EXPECT_EQ(demangle("_ZN3foo3barEi"), "foo::bar(int)");
    EXPECT_EQ(demangle("main"), "main");
    EXPECT_EQ(demangle("_Zgarbage!"), "_Zgarbage!");
}

// --- hostile module paths, --sysroot and --debug-dir (issue 17, item 4) --------------------------

/// Runs `body` in a child under an alarm: its exit status, or 128 + the signal that ended it (the
/// alarm's SIGALRM when it hung), so that a regression that blocks fails instead of hanging.
int in_child(int seconds, const std::function<int()>& body) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        alarm(static_cast<unsigned>(seconds));
        _exit(body());
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// A directory tree under $TMPDIR, removed with everything in it.
class TempTree {
public:
    TempTree() {
        const char* tmp = std::getenv("TMPDIR");
        std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/memguard-sym.XXXXXX";
        if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        root_ = templ;
    }
    ~TempTree() {
        nftw(
            root_.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16,
            FTW_DEPTH | FTW_PHYS);
    }
    TempTree(const TempTree&) = delete;
    TempTree& operator=(const TempTree&) = delete;
    const std::string& root() const { return root_; }
    /// Creates the directories of `rel` (a path under the root) and returns the full path.
    std::string make_parents(const std::string& rel) const {
        for (size_t slash = rel.find('/', 1); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
            mkdir((root_ + "/" + rel.substr(0, slash)).c_str(), 0755);
        }
        return root_ + "/" + rel;
    }
    std::string copy(const std::string& from, const std::string& rel) const {
        std::string to = make_parents(rel);
        std::ofstream(to, std::ios::binary) << test::read_file(from);
        return to;
    }

private:
    std::string root_;
};

// A report can name any path as a module: a FIFO would block a plain open() until a writer came
// (top, plot, export and diff hung). Not a regular file: one warning, the frame unsymbolized.
TEST(Symbolizer, AModuleThatIsAFifoIsRefusedWithoutBlocking) {
    test::TempDir dir;
    std::string fifo = dir.path() + "/libfifo.so";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    Report r = parse_report(test::kHeader + "M 0 1000 2000 0 - " + fifo + "\nS 1 1100\nZ 1\n", "x.mgr");
    int rc = in_child(10, [&] {
        Symbolizer sym(r);
        Frame f = sym.frame(0x1100, 1);
        std::vector<std::string> w = sym.take_warnings();
        if (!f.function.empty() || f.module == nullptr || f.offset != 0x1100) return 3;
        return w.size() == 1 && w[0] == fifo + ": cannot read (not a regular file); its frames are not symbolized" ? 0
                                                                                                                   : 4;
    });
    EXPECT_EQ(rc, 0) << (rc == 128 + SIGALRM ? "the symbolizer blocked on the FIFO" : "wrong frame or warning");
}

TEST(Symbolizer, ADeviceOrADirectoryIsNotAModule) {
    test::TempDir dir;
    for (const std::string& path : {std::string("/dev/zero"), std::string("/dev/null"), dir.path()}) {
        Report r = parse_report(test::kHeader + "M 0 1000 2000 0 - " + path + "\nS 1 1100\nZ 1\n", "x.mgr");
        Symbolizer sym(r);
        EXPECT_EQ(sym.frame(0x1100, 1).function, "") << path;
        std::vector<std::string> w = sym.take_warnings();
        ASSERT_EQ(w.size(), 1u) << path;
        EXPECT_EQ(w[0], path + ": cannot read (not a regular file); its frames are not symbolized");
    }
}

// Many M records naming one file share one mapping and one remark (a report of 100000 such
// records would otherwise map the file, and read its symbol tables, 100000 times).
TEST(Symbolizer, ModulesNamingTheSameFileShareIt) {
    Probe p = probe(memguard_symtest::known_function(3));
    std::string content = test::kHeader;
    const std::string other = "00112233445566778899aabbccddeeff00112233";
    for (int i = 0; i < 3; ++i) content += p.module.m_record(i);
    for (int i = 3; i < 6; ++i) content += p.module.m_record(i, &other);
    Report r = parse_report(content + "Z 1\n", "x.mgr");
    SymbolizerOptions no_lines;
    no_lines.addr2line = "";
    Symbolizer sym(r, no_lines);
    const uint64_t lookup = p.ip;
    for (size_t known = 1; known <= 6; ++known) {
        Frame f = sym.frame(lookup, known);
        ASSERT_NE(f.module, nullptr);
        EXPECT_EQ(f.module->id, known - 1);
        EXPECT_EQ(f.function, known <= 3 ? "memguard_symtest::known_function(int)" : "") << known;
    }
    EXPECT_EQ(sym.take_warnings().size(), 1u);  // the three mismatches say the same
}

// addr2line reads the file that was checked, through the descriptor kept open: replacing the file
// at the path after the check (here by the addr2line wrapper itself, just before it runs) changes
// nothing. Given the path, addr2line would read the stripped copy and find no line.
TEST(Symbolizer, Addr2lineReadsTheCheckedFileNotThePath) {
    std::string real = find_program("addr2line");
    std::string stripped = MEMGUARD_SYMTEST_STRIPPED;
    if (real.empty() || stripped.empty()) GTEST_SKIP() << "needs addr2line and the stripped copy";
    Probe p = probe(memguard_symtest::known_function(3));
    test::TempDir dir;
    std::string lib = dir.write("libswapped.so", test::read_file(p.module.path));
    std::string log = dir.path() + "/args.log";
    std::string wrapper = dir.write("a2l.sh", "#!/bin/sh\necho \"$@\" > '" + log + "'\ncp '" + stripped + "' '" + lib +
                                                  ".new' && mv '" + lib + ".new' '" + lib + "'\nexec '" + real +
                                                  "' \"$@\"\n");
    chmod(wrapper.c_str(), 0755);
    Report r = report_for(p.module, p.ip, nullptr, &lib);
    SymbolizerOptions options;
    options.addr2line = wrapper;
    Frame f = only_frame(r, options);
    EXPECT_EQ(f.function, "memguard_symtest::known_function(int)");
    EXPECT_EQ(f.line, memguard_symtest::known_call_line());
    EXPECT_EQ(base_name(f.file), "symtest_lib.cpp");
    EXPECT_EQ(test::read_file(log).rfind("-e /proc/self/fd/", 0), 0u) << test::read_file(log);
}

// --sysroot: the report's paths are looked up under a directory (a copy of the machine the run was
// on), absolute links and ".." included.
TEST(Symbolizer, SysrootFindsTheModulesUnderItsDirectory) {
    Probe p = probe(memguard_symtest::known_function(3));
    TempTree tree;
    tree.copy(p.module.path, "opt/run/lib/libmemguard_symtest.so");
    std::string link = tree.make_parents("opt/run/lib/liblink.so");
    ASSERT_EQ(symlink("/opt/run/lib/libmemguard_symtest.so", link.c_str()), 0);  // absolute: inside the root
    SymbolizerOptions options;
    options.addr2line = "";
    options.sysroot = tree.root();
    for (const std::string& path :
         {std::string("/opt/run/lib/libmemguard_symtest.so"), std::string("/opt/run/lib/liblink.so"),
          std::string("/opt/run/../run/lib/./libmemguard_symtest.so")}) {
        Report r = report_for(p.module, p.ip, nullptr, &path);
        Frame f = only_frame(r, options);
        EXPECT_EQ(f.function, "memguard_symtest::known_function(int)") << path;
        EXPECT_EQ(f.module->path, path);
    }
    // Without it the path is not on this machine: quietly unsymbolized.
    std::string inside = "/opt/run/lib/libmemguard_symtest.so";
    SymbolizerOptions plain;
    plain.addr2line = "";
    EXPECT_EQ(only_frame(report_for(p.module, p.ip, nullptr, &inside), plain).function, "");
    // ".." cannot leave the root: the host's copy of the library is not found from inside it.
    std::string escape = "/../../../../../../.." + p.module.path;
    Report out = report_for(p.module, p.ip, nullptr, &escape);
    Symbolizer sym(out, options);
    EXPECT_EQ(sym.frame(p.ip, 1).function, "");
    EXPECT_TRUE(sym.take_warnings().empty());
}

// --debug-dir: a module's separate debug file by its build-id (DIR/.build-id/xx/rest.debug), for
// function names the stripped module lacks and for file:line.
TEST(Symbolizer, DebugDirFindsTheDebugFileByBuildId) {
    std::string stripped = MEMGUARD_SYMTEST_STRIPPED, debug = MEMGUARD_SYMTEST_DEBUG;
    if (stripped.empty() || debug.empty()) GTEST_SKIP() << "needs strip and objcopy";
    Probe hidden = probe(memguard_symtest::call_hidden_function(3));
    const std::string& id = hidden.module.build_id;
    ASSERT_GT(id.size(), 2u);
    TempTree tree;
    tree.copy(debug, ".build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug");
    SymbolizerOptions options;
    options.debug_dir = tree.root();
    // The stripped module has no .symtab (the hidden function is not in .dynsym) and no DWARF.
    Frame plain = only_frame(report_for(hidden.module, hidden.ip, nullptr, &stripped));
    EXPECT_EQ(plain.function, "");
    Frame f = only_frame(report_for(hidden.module, hidden.ip, nullptr, &stripped), options);
    EXPECT_EQ(f.function, "memguard_symtest::hidden_function(int)");
    if (have_addr2line()) {
        EXPECT_EQ(base_name(f.file), "symtest_lib.cpp");
        EXPECT_NE(f.line, 0);
    }
    // The module file itself need not exist on this machine.
    std::string gone = "/nonexistent-memguard-dir/libmemguard_symtest.so";
    EXPECT_EQ(only_frame(report_for(hidden.module, hidden.ip, nullptr, &gone), options).function,
              "memguard_symtest::hidden_function(int)");
}

TEST(Symbolizer, ADebugFileWithAnotherBuildIdIsNotUsed) {
    std::string stripped = MEMGUARD_SYMTEST_STRIPPED;
    if (stripped.empty()) GTEST_SKIP() << "needs strip";
    Probe hidden = probe(memguard_symtest::call_hidden_function(3));
    Probe exe = probe(exe_function());
    const std::string& id = hidden.module.build_id;
    ASSERT_NE(exe.module.build_id, id);
    TempTree tree;
    std::string planted = tree.copy(exe.module.path, ".build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug");
    SymbolizerOptions options;
    options.addr2line = "";
    options.debug_dir = tree.root();
    Report r = report_for(hidden.module, hidden.ip, nullptr, &stripped);
    Symbolizer sym(r, options);
    Frame f = sym.frame(hidden.ip, 1);
    EXPECT_EQ(f.function, "");
    ASSERT_NE(f.module, nullptr);
    EXPECT_EQ(f.offset, hidden.ip - hidden.module.bias);
    std::vector<std::string> w = sym.take_warnings();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0],
              planted + ": GNU build-id " + exe.module.build_id + " differs from the recorded " + id + "; not used");
}

// --- the ELF reader on its own -------------------------------------------------------------------

TEST(ElfFile, BuildIdMatchesTheMappedNote) {
    Probe p = probe(memguard_symtest::known_function(3));
    std::string error;
    auto elf = ElfFile::open(p.module.path, error);
    ASSERT_TRUE(elf) << error;
    EXPECT_EQ(elf->build_id(), p.module.build_id);
    EXPECT_TRUE(elf->has_debug_line());
    EXPECT_TRUE(elf->has_symtab());
    EXPECT_EQ(elf->function_at(p.ip - p.module.bias - 1), "_ZN16memguard_symtest14known_functionEi");
    EXPECT_EQ(elf->function_at(0), std::nullopt);
}

TEST(ElfFile, OpenErrors) {
    std::string error;
    EXPECT_EQ(ElfFile::open("/nonexistent-memguard/x.so", error), nullptr);
    EXPECT_EQ(error, "No such file or directory");
    test::TempDir dir;
    EXPECT_EQ(ElfFile::open(dir.path(), error), nullptr);
    EXPECT_EQ(error, "not a regular file");
    EXPECT_EQ(ElfFile::open("/dev/null", error), nullptr);
    EXPECT_EQ(error, "not a regular file");
    // Beyond the size bound (a sparse file: no disk used), refused before it is mapped.
    std::string big = dir.write("big.so", "");
    ASSERT_EQ(truncate(big.c_str(), static_cast<off_t>(ElfFile::kMaxSize + 1)), 0);
    EXPECT_EQ(ElfFile::open(big, error), nullptr);
    EXPECT_EQ(error, "larger than 16 GiB");
    std::string text = dir.write("t.txt", std::string(200, 'x'));
    EXPECT_EQ(ElfFile::open(text, error), nullptr);
    EXPECT_EQ(error, "not an ELF64 little-endian file");
}

TEST(ElfFile, CorruptCopiesNeverCrash) {
    Probe p = probe(memguard_symtest::known_function(3));
    std::string image = test::read_file(p.module.path);
    ASSERT_GT(image.size(), 4096u);
    test::TempDir dir;
    uint32_t state = 12345;
    auto next = [&state] { return state = state * 1103515245u + 12345u; };
    size_t opened = 0;
    for (int iter = 0; iter < 300; ++iter) {
        std::string copy = image;
        if (iter % 2 == 0) copy.resize(next() % copy.size());
        for (int k = 0; k < 1 + iter % 20; ++k) {
            // Bias the damage towards the headers and the tables at the end of the file.
            size_t pos = (k % 2 == 0) ? next() % std::min<size_t>(copy.size() + 1, 256) : next() % (copy.size() + 1);
            if (pos < copy.size()) copy[pos] = static_cast<char>(next() >> 16);
        }
        std::string path = dir.write("c.so", copy);
        std::string error;
        auto elf = ElfFile::open(path, error);
        if (!elf) continue;
        ++opened;
        for (uint64_t a = 0; a < 0x10000; a += 0x333) elf->function_at(a);
        (void)elf->build_id();
    }
    EXPECT_GT(opened, 10u);
}

}  // namespace
}  // namespace memguard::report

// The shape of the binaries: libmemguard.so depends on nothing but the C/C++ runtime and exports
// only the CUDA functions and its C API; the fake runtime and the test programs link like the
// real ones, so that what the other tests see is what real programs see.
#include "preload_fixture.h"

#include <elf.h>

#include <algorithm>

#include <cstdio>
#include <set>

namespace preload_test {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

const char* const k_allocation_api[] = {
    "cudaMalloc",        "cudaFree",        "cudaMallocAsync", "cudaFreeAsync", "cudaMallocFromPoolAsync",
    "cudaMallocManaged", "cudaMallocPitch", "cudaMallocHost",  "cudaHostAlloc", "cudaFreeHost",
};

// The stream capture and graph entry points memguard interposes (src/interpose/graph_hooks.cpp).
const char* const k_capture_api[] = {
    "cudaStreamBeginCapture",
    "cudaStreamBeginCapture_ptsz",
    "cudaStreamBeginCaptureToGraph",
    "cudaStreamBeginCaptureToGraph_ptsz",
    "cudaStreamEndCapture",
    "cudaStreamEndCapture_ptsz",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaGraphInstantiate",
    "cudaGraphInstantiateWithFlags",
    "cudaGraphInstantiateWithParams",
    "cudaGraphInstantiateWithParams_ptsz",
    "cudaGraphLaunch",
    "cudaGraphLaunch_ptsz",
    "cudaGraphExecDestroy",
    "cudaGraphDestroy",
};

// What else of the capture and graph API the fake runtime defines for the test programs.
const char* const k_fake_capture_extras[] = {
    "cudaStreamIsCapturing",
    "cudaStreamIsCapturing_ptsz",
    "cudaStreamGetCaptureInfo",
    "cudaStreamGetCaptureInfo_ptsz",
    "cudaGraphCreate",
    "cudaStreamSynchronize",
    "cudaStreamSynchronize_ptsz",
    "cudaEventCreate",
    "cudaEventRecord",
    "cudaEventRecord_ptsz",
    "cudaEventQuery",
    "cudaEventDestroy",
};

/// Defined symbols a library exports: binding global, weak or unique, in some section.
std::vector<ElfSymbol> exported(const ElfFile& file) {
    std::vector<ElfSymbol> symbols;
    for (const ElfSymbol& symbol : file.dynamic_symbols()) {
        if (symbol.is_defined() && symbol.binding != STB_LOCAL && !symbol.name.empty()) {
            symbols.push_back(symbol);
        }
    }
    return symbols;
}

TEST(Elf, LibmemguardNeedsOnlyTheSystemRuntime) {
    const std::set<std::string> allowed = {
        "libc.so.6",      "libm.so.6",     "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
        "libstdc++.so.6", "libgcc_s.so.1",
    };
    ElfFile lib = ElfFile::load(Paths::memguard_lib());
    ASSERT_FALSE(lib.needed().empty()) << "no NEEDED at all: not a dynamic library?";
    for (const std::string& needed : lib.needed()) {
        EXPECT_TRUE(allowed.count(needed) != 0) << "libmemguard.so needs " << needed;
    }
    EXPECT_TRUE(lib.runpath().empty()) << "RUNPATH " << lib.runpath();
    EXPECT_TRUE(lib.rpath().empty()) << "RPATH " << lib.rpath();
}

TEST(Elf, LibmemguardExportsOnlyCudaFunctionsAndItsApi) {
    ElfFile lib = ElfFile::load(Paths::memguard_lib());
    const std::vector<std::string>& version_nodes = lib.version_definitions();
    std::set<std::string> names;
    for (const ElfSymbol& symbol : exported(lib)) {
        names.insert(symbol.name);
        bool version_node = symbol.section == SHN_ABS &&
                            std::find(version_nodes.begin(), version_nodes.end(), symbol.name) != version_nodes.end();
        // dlsym: the lookup interposer of the driver entry points (src/interpose/lookup_hooks.cpp).
        bool allowed = starts_with(symbol.name, "cu") || starts_with(symbol.name, "memguard_") ||
                       symbol.name == "dlsym" || version_node ||
                       // NVTX's entry point of an injection library (src/runtime/nvtx.cpp).
                       symbol.name == "InitializeInjectionNvtx2" ||
                       // ThreadSanitizer's default suppressions (src/runtime/sanitizers.cpp).
                       symbol.name == "__tsan_default_suppressions";
        EXPECT_TRUE(allowed) << "libmemguard.so exports " << symbol.name
                             << (starts_with(symbol.name, "_Z") ? " (C++)" : "")
                             << (starts_with(symbol.name, "_U") || starts_with(symbol.name, "unw_") ? " (libunwind)"
                                                                                                    : "");
    }
    EXPECT_EQ(names.count("InitializeInjectionNvtx2"), 1u) << "libmemguard.so is an NVTX injection library";
    // The interposers: functions, and unversioned (or carrying the runtime's own version), since a
    // program's reference cudaMalloc@libcudart.so.13 binds to nothing else.
    for (const char* api : k_allocation_api) {
        SCOPED_TRACE(api);
        std::vector<ElfSymbol> all = exported(lib);
        auto found = std::find_if(all.begin(), all.end(), [&](const ElfSymbol& s) { return s.name == api; });
        ASSERT_NE(found, all.end()) << "libmemguard.so does not export " << api;
        EXPECT_EQ(found->type, static_cast<unsigned>(STT_FUNC));
        EXPECT_TRUE(found->version.empty() || found->version == "libcudart.so.13")
            << api << " has version " << found->version;
    }
}

TEST(Elf, FakeRuntimeIsShapedLikeTheRealOne) {
    ElfFile fake = ElfFile::load(Paths::fake_cudart());
    EXPECT_EQ(fake.soname(), "libcudart.so.13");
    EXPECT_EQ(base_name(Paths::fake_cudart()), "libcudart.so.13");
    std::vector<ElfSymbol> symbols = exported(fake);
    for (const char* api : k_allocation_api) {
        auto found = std::find_if(symbols.begin(), symbols.end(), [&](const ElfSymbol& s) { return s.name == api; });
        ASSERT_NE(found, symbols.end()) << api;
        EXPECT_EQ(found->version, "libcudart.so.13") << api;
    }
    for (const ElfSymbol& symbol : symbols) {
        if (symbol.section == SHN_ABS) continue;  // version nodes
        EXPECT_TRUE(starts_with(symbol.name, "cuda") || starts_with(symbol.name, "fakecuda_"))
            << "the fake runtime exports " << symbol.name;
    }

    // Where a real runtime is installed, every CUDA function of the fake exists there, with the
    // same version.
    std::string real;
    if (FILE* pipe = popen("/sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null", "r")) {
        char line[1024];
        while (real.empty() && fgets(line, sizeof(line), pipe) != nullptr) {
            std::string text = line;
            size_t arrow = text.find("=> ");
            if (text.find("libcudart.so.13 ") != std::string::npos && arrow != std::string::npos &&
                text.find("x86-64") != std::string::npos) {
                real = text.substr(arrow + 3);
                while (!real.empty() && (real.back() == '\n' || real.back() == ' ')) real.pop_back();
            }
        }
        pclose(pipe);
    }
    if (real.empty()) GTEST_SKIP() << "no real libcudart.so.13 to compare with";
    ElfFile real_lib = ElfFile::load(real);
    std::vector<ElfSymbol> real_symbols = exported(real_lib);
    for (const ElfSymbol& symbol : symbols) {
        if (!starts_with(symbol.name, "cuda")) continue;
        auto found = std::find_if(real_symbols.begin(), real_symbols.end(),
                                  [&](const ElfSymbol& s) { return s.name == symbol.name; });
        ASSERT_NE(found, real_symbols.end()) << symbol.name << " is not in " << real;
        EXPECT_EQ(found->version, symbol.version) << symbol.name;
    }
}

TEST(Elf, CaptureAndGraphEntryPointsAreInterposedAndFaked) {
    ElfFile lib = ElfFile::load(Paths::memguard_lib());
    ElfFile fake = ElfFile::load(Paths::fake_cudart());
    std::vector<ElfSymbol> hooks = exported(lib);
    std::vector<ElfSymbol> faked = exported(fake);
    auto find = [](const std::vector<ElfSymbol>& symbols, const std::string& name) {
        return std::find_if(symbols.begin(), symbols.end(), [&](const ElfSymbol& s) { return s.name == name; });
    };
    for (const char* api : k_capture_api) {
        SCOPED_TRACE(api);
        auto hook = find(hooks, api);
        ASSERT_NE(hook, hooks.end()) << "libmemguard.so does not export " << api;
        EXPECT_EQ(hook->type, static_cast<unsigned>(STT_FUNC));
        EXPECT_TRUE(hook->version.empty() || hook->version == "libcudart.so.13") << hook->version;
        auto real = find(faked, api);
        ASSERT_NE(real, faked.end()) << "the fake runtime does not export " << api;
        EXPECT_EQ(real->version, "libcudart.so.13");
    }
    for (const char* api : k_fake_capture_extras) {
        auto real = find(faked, api);
        ASSERT_NE(real, faked.end()) << "the fake runtime does not export " << api;
        EXPECT_EQ(real->version, "libcudart.so.13") << api;
    }
    // graph_pool reaches the _ptsz entry points, as programs built for per-thread default streams do.
    ElfFile program = ElfFile::load(Paths::app("graph_pool"));
    std::set<std::string> references;
    for (const ElfSymbol& symbol : program.dynamic_symbols()) {
        if (!symbol.is_defined()) references.insert(symbol.name);
    }
    for (const char* api : {"cudaStreamBeginCapture_ptsz", "cudaStreamBeginCaptureToGraph_ptsz",
                            "cudaStreamEndCapture_ptsz", "cudaGraphInstantiateWithParams_ptsz", "cudaGraphLaunch_ptsz",
                            "cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphLaunch"}) {
        EXPECT_EQ(references.count(api), 1u) << "graph_pool does not call " << api;
    }
}

TEST(Elf, TestProgramsLinkTheRuntimeLikeRealPrograms) {
    std::string fake_dir = real_path(Paths::fake_cudart());
    fake_dir = fake_dir.substr(0, fake_dir.rfind('/'));
    for (const char* app :
         {"alloc_kinds", "oom", "threads", "fork", "fork_exec", "killed", "noop", "exit_code", "graph_pool",
          "unsafe_calls", "free_live_graph", "warmup", "many_captures", "capture_misuse"}) {
        SCOPED_TRACE(app);
        ElfFile program = ElfFile::load(Paths::app(app));
        EXPECT_NE(std::find(program.needed().begin(), program.needed().end(), "libcudart.so.13"),
                  program.needed().end());
        EXPECT_NE(program.runpath().find(fake_dir), std::string::npos)
            << "RUNPATH '" << program.runpath() << "' RPATH '" << program.rpath() << "'";
        // References to the runtime carry its version, as with the real library.
        int references = 0;
        for (const ElfSymbol& symbol : program.dynamic_symbols()) {
            if (!starts_with(symbol.name, "cuda") || symbol.is_defined()) continue;
            ++references;
            EXPECT_EQ(symbol.version, "libcudart.so.13") << symbol.name;
        }
        EXPECT_GT(references, 0) << "no reference to the runtime";
    }
    ElfFile worker = ElfFile::load(Paths::dl_worker());
    EXPECT_NE(std::find(worker.needed().begin(), worker.needed().end(), "libcudart.so.13"), worker.needed().end());
}

}  // namespace
}  // namespace preload_test

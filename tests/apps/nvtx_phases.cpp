// NVTX ranges and marks from three NVTX copies (the two libraries of nvtx_lib.h and this program),
// and memguard's C API, around CUDA allocations. Logs what the NVTX calls returned:
//   nvtx <label> <value>       a push/pop level or a start/end range id
//   env <name> <value|(unset)> an environment variable as the program saw it at start
// Modes (argv[1]): all (default), no_cuda (the same NVTX and C API calls, no CUDA allocation).
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "app_common.h"
#include "nvtx_lib.h"

namespace {

// memguard's C API through the global scope, so that the program also runs without memguard.
struct MemguardApi {
    uint64_t (*phase_begin)(const char*) = nullptr;
    void (*phase_end)(uint64_t) = nullptr;
    void (*mark)(const char*) = nullptr;
    MemguardApi() {
        phase_begin = reinterpret_cast<uint64_t (*)(const char*)>(dlsym(RTLD_DEFAULT, "memguard_phase_begin"));
        phase_end = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "memguard_phase_end"));
        mark = reinterpret_cast<void (*)(const char*)>(dlsym(RTLD_DEFAULT, "memguard_mark"));
    }
    uint64_t begin(const char* name) const { return phase_begin ? phase_begin(name) : 0; }
    void end(uint64_t id) const {
        if (phase_end) phase_end(id);
    }
    void note(const char* name) const {
        if (mark) mark(name);
    }
};

void log_value(const char* label, long long value) {
    std::lock_guard<std::mutex> lock(app::log_mutex());
    std::printf("nvtx %s %lld\n", label, value);
}

bool g_cuda = true;

APP_FN void* phase_alloc(size_t size) {
    if (!g_cuda) return nullptr;
    void* p = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&p, size), cudaSuccess);
    app::log_alloc("cudaMalloc", p, size, nullptr, false, 0, "phase_alloc");
    return p;
}

void phase_free(void* p) {
    if (!p) return;
    app::expect("cudaFree", cudaFree(p), cudaSuccess);
    app::log_free("cudaFree", p, nullptr, false);
}

}  // namespace

int main(int argc, char** argv) {
    app::init_log();
    g_cuda = !(argc > 1 && std::strcmp(argv[1], "no_cuda") == 0);
    const char* injection = std::getenv("NVTX_INJECTION64_PATH");
    std::printf("env NVTX_INJECTION64_PATH %s\n", injection ? injection : "(unset)");
    MemguardApi mg;

    // A phase begun before the first CUDA allocation: written once the report exists.
    uint64_t load = mg.begin("load model");
    log_value("api_load", static_cast<long long>(load));
    mg.note("started");

    log_value("push_outer", nvtx_a_push("outer"));
    void* weights = phase_alloc(1 << 20);
    log_value("push_inner", nvtx_b_push_w(L"inner-\u00fc\u4e2d"));
    phase_free(phase_alloc(2 << 20));
    log_value("pop_inner", nvtx_a_pop());  // pushed through one NVTX copy, popped through another
    log_value("push_main", nvtxRangePushA("main own"));
    log_value("pop_main", nvtxRangePop());
    log_value("pop_outer", nvtx_b_pop());
    log_value("pop_empty", nvtx_a_pop());

    // Push/pop are scoped to their domain: popping "dom" ends its range, not the later default one.
    log_value("push_dom_step", nvtx_b_domain_push("dom", "step"));
    log_value("push_default_d0", nvtx_a_push("d0"));
    void* in_step = phase_alloc(3 << 20);
    log_value("pop_dom_step", nvtx_b_domain_pop("dom"));
    log_value("pop_default_d0", nvtx_a_pop());
    phase_free(in_step);

    // Start/end ranges overlap and may end on another thread.
    uint64_t r1 = nvtx_a_start("r1");
    uint64_t r2 = nvtx_b_start_registered("dom", "r2");
    log_value("start_r1", static_cast<long long>(r1));
    log_value("start_r2", static_cast<long long>(r2));
    void* overlap = phase_alloc(4 << 20);
    nvtx_a_end(r1);
    std::thread([r2] {
        app::log_tid("ender_tid");
        nvtx_b_end_in_domain("dom", r2);
    }).join();
    phase_free(overlap);

    nvtx_a_mark("mark-a");
    nvtx_b_mark_w(L"mark-w\u00e9");
    nvtx_b_domain_mark("dom", "dmark");
    nvtxMarkA("main mark");

    // Threads: each has its own push/pop stack.
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([i] {
            std::string name = "thread-" + std::to_string(i);
            std::wstring inner = L"thread-" + std::to_wstring(i) + L"/inner";
            app::log_tid(("tid_" + name).c_str());
            nvtx_a_push(name.c_str());
            void* p = phase_alloc(static_cast<size_t>(5 + i) << 20);
            nvtx_b_push_w(inner.c_str());
            phase_free(p);
            nvtx_b_pop();
            nvtx_a_pop();
        });
    }
    for (auto& t : threads) t.join();

    mg.note("api mark");
    mg.end(load);
    mg.end(load);    // ended twice: ignored
    mg.end(999999);  // never begun: ignored
    mg.end(0);       // memguard inactive: ignored
    phase_free(weights);
    std::printf("nvtx_phases: done\n");
    return 0;
}

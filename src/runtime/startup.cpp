// The library's composition root: start-up at load (or at the first hook, whichever comes first)
// and the end record at exit.
#include <cstdlib>
#include <pthread.h>
#include <sys/auxv.h>

#include "allocmode/cuda_backend.h"
#include "allocmode/torch_bridge.h"
#include "common/config.h"
#include "common/log.h"
#include "python/hook.h"
#include "runtime/fork.h"
#include "runtime/nvtx.h"
#include "runtime/process.h"

namespace memguard::runtime {

std::atomic<bool> g_initialized{false};

void initialize_once() noexcept {
    // pthread_once, not std::call_once: libstdc++'s call_once goes through its own thread-locals
    // (std::__once_callable), which this library's initial-exec TLS model would bind statically,
    // and a late dlopen of libmemguard.so (allocator mode by hand, in a process whose libstdc++
    // came with torch's dlopen) then fails: "cannot allocate memory in static TLS block".
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        // Decided here, before anything reads the environment: in a setuid, setgid or capability
        // program (AT_SECURE) the environment is a less privileged user's, and memguard stays off
        // without reading it (startup_config). secure_getenv keeps that true of this lookup even
        // if the two ever disagreed.
        ConfigResult parsed = startup_config(getauxval(AT_SECURE),
                                             [](const char* name) { return secure_getenv(name); });
        set_log_level(parsed.config.log_level);
        for (const std::string& problem : parsed.problems) MG_LOG_WARN("{}", problem);
        recorder().init(parsed.config);
        register_fork_handlers(parsed.config.enabled);
        // Allocator mode's expandable segments reserve and create through the driver as the hooks
        // see others do: one order lock for both (runtime/fork.h).
        allocmode::set_vmm_order_lock(&vmm_order_lock());
        if (parsed.config.enabled) {
            if (parsed.config.allocator == AllocatorMode::Memguard) allocmode::arm_torch_switch(recorder());
            python::install({parsed.config.collect_compile_garbage, parsed.config.python_stacks,
                             parsed.config.compile_window, parsed.config.native_below_python, parsed.config.steps,
                             parsed.config.explain_oom, parsed.config.cycles},
                            recorder());
        }
        register_nvtx_injection(parsed.config.enabled && parsed.config.nvtx);
        g_initialized.store(true, std::memory_order_release);
    });
}

}  // namespace memguard::runtime

__attribute__((constructor)) static void memguard_library_init() { memguard::runtime::initialize_once(); }

__attribute__((destructor)) static void memguard_library_fini() { memguard::runtime::recorder().shutdown(); }

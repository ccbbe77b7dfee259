#include "interpose/init.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <sys/auxv.h>

#include "common/config.h"
#include "common/log.h"
#include "interpose/allocator_api.h"
#include "interpose/nvtx.h"
#include "memguard/memguard.h"
#include "python/hook.h"
#include "track/recorder.h"

namespace memguard::interpose {

std::atomic<bool> g_initialized{false};

namespace {
void before_fork() { track::Recorder::instance().before_fork(); }
void after_fork_parent() { track::Recorder::instance().after_fork_parent(); }
void after_fork_child() { track::Recorder::instance().after_fork_child(); }
}  // namespace

void initialize_once() noexcept {
    static std::once_flag once;
    std::call_once(once, [] {
        // Decided here, before anything reads the environment: in a setuid, setgid or capability
        // program (AT_SECURE) the environment is a less privileged user's, and memguard stays off
        // without reading it (startup_config). secure_getenv keeps that true of this lookup even
        // if the two ever disagreed.
        ConfigResult parsed =
            startup_config(getauxval(AT_SECURE), [](const char* name) { return secure_getenv(name); });
        set_log_level(parsed.config.log_level);
        for (const std::string& problem : parsed.problems) MG_LOG_WARN("{}", problem);
        track::Recorder::instance().init(parsed.config);
        if (parsed.config.enabled) {
            pthread_atfork(before_fork, after_fork_parent, after_fork_child);
            if (parsed.config.allocator == AllocatorMode::Memguard) python::set_allocator_bridge(allocator_bridge());
            python::install({parsed.config.collect_compile_garbage, parsed.config.python_stacks,
                             parsed.config.compile_window, parsed.config.native_below_python},
                            track::Recorder::instance());
        }
        register_nvtx_injection(parsed.config.enabled && parsed.config.nvtx);
        g_initialized.store(true, std::memory_order_release);
    });
}

}  // namespace memguard::interpose

using memguard::track::Recorder;

__attribute__((constructor)) static void memguard_library_init() { memguard::interpose::initialize_once(); }

__attribute__((destructor)) static void memguard_library_fini() { Recorder::instance().shutdown(); }

#define MG_EXPORT extern "C" __attribute__((visibility("default")))

MG_EXPORT const char* memguard_version(void) { return MEMGUARD_VERSION_STRING; }

MG_EXPORT int memguard_active(void) { return Recorder::instance().active() ? 1 : 0; }

MG_EXPORT int memguard_flush(void) {
    if (Recorder::instance().report_path().empty()) return -1;
    Recorder::instance().flush();
    return 0;
}

MG_EXPORT uint64_t memguard_phase_begin(const char* name) {
    memguard::interpose::ensure_initialized();
    return Recorder::instance().record_phase_begin(memguard::track::PhaseSource::Api, name ? name : "");
}

MG_EXPORT void memguard_phase_end(uint64_t id) { Recorder::instance().record_phase_end(id); }

MG_EXPORT void memguard_mark(const char* name) {
    memguard::interpose::ensure_initialized();
    Recorder::instance().record_mark(memguard::track::PhaseSource::Api, name ? name : "");
}

MG_EXPORT size_t memguard_report_path(char* buf, size_t len) {
    std::string path = Recorder::instance().report_path();
    if (path.empty()) return 0;
    if (buf && len > 0) {
        size_t n = path.size() < len - 1 ? path.size() : len - 1;
        std::memcpy(buf, path.data(), n);
        buf[n] = '\0';
    }
    return path.size();
}

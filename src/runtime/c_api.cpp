// The public C API (include/memguard/memguard.h), exported unversioned like every memguard_*
// symbol.
#include <cstring>
#include <string>

#include "memguard/memguard.h"
#include "runtime/process.h"

#define MG_EXPORT extern "C" __attribute__((visibility("default")))

using memguard::runtime::ensure_initialized;
using memguard::runtime::recorder;

MG_EXPORT const char* memguard_version(void) { return MEMGUARD_VERSION_STRING; }

MG_EXPORT int memguard_active(void) { return recorder().active() ? 1 : 0; }

MG_EXPORT int memguard_flush(void) {
    if (recorder().report_path().empty()) return -1;
    recorder().flush();
    return 0;
}

MG_EXPORT uint64_t memguard_phase_begin(const char* name) {
    ensure_initialized();
    return recorder().record_phase_begin(memguard::track::PhaseSource::Api, name ? name : "");
}

MG_EXPORT void memguard_phase_end(uint64_t id) { recorder().record_phase_end(id); }

MG_EXPORT void memguard_mark(const char* name) {
    ensure_initialized();
    recorder().record_mark(memguard::track::PhaseSource::Api, name ? name : "");
}

MG_EXPORT int memguard_stats(int device, memguard_stats_t* out, size_t size) {
    if (!out) return -1;
    memguard_stats_t s{};
    const bool on = recorder().active();
    if (on) {
        const memguard::track::Recorder::Stats r = recorder().stats(device < 0 ? -1 : device);
        s.gpu_live_bytes = r.gpu_live;
        s.gpu_peak_bytes = r.gpu_peak;
        s.live_bytes = r.tensors ? r.tensor_live : r.gpu_live;
        s.peak_bytes = r.tensors ? r.tensor_peak : r.gpu_peak;
        s.gc_collections = r.gc_collections;
        s.gc_freeing_collections = r.gc_freeing_collections;
        s.gc_cuda_bytes_freed = r.gc_cuda_bytes_freed;
        s.allocator_mode = r.tensors ? 1 : 0;
    }
    std::memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return on ? 0 : -1;
}

MG_EXPORT void memguard_reset_peak(int device) {
    if (recorder().active()) recorder().reset_peak(device < 0 ? -1 : device);
}

MG_EXPORT size_t memguard_report_path(char* buf, size_t len) {
    std::string path = recorder().report_path();
    if (path.empty()) return 0;
    if (buf && len > 0) {
        size_t n = path.size() < len - 1 ? path.size() : len - 1;
        std::memcpy(buf, path.data(), n);
        buf[n] = '\0';
    }
    return path.size();
}

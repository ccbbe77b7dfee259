// The x record of a failed CUDA allocation call (record_calls.h): the device's free and total bytes
// from the real cudaMemGetInfo (runtime calls) or cuMemGetInfo_v2 (driver calls), asked only when no
// stream capture is in progress (neither is on CUDA's list of capture-safe calls), then a flush so
// that a rank killed right after the failure keeps it. Off the hook's success path: it runs only
// after an out-of-memory error, where one more CUDA call costs nothing that matters.
#include <cstddef>

#include "interpose/record_calls.h"

namespace memguard::interpose {
namespace {

cuda::RealFunction<cudaError_t (*)(size_t*, size_t*)> r_cuda_mem_get_info("cudaMemGetInfo");
cuda::RealFunction<int (*)(size_t*, size_t*)> r_cu_mem_get_info("cuMemGetInfo_v2");

bool is_runtime(track::Api api) { return format::name_of(api).substr(0, 4) == "cuda"; }

}  // namespace

void record_cuda_oom(track::Recorder& rec, track::Api api, uint64_t size, int device, const uintptr_t* ips, int n) {
    format::rec::OomContext x;
    x.device = device < 0 ? 0 : device;
    x.source = format::OomSource::Cuda;
    x.requested = size;
    x.rounded = size;
    x.capturing = rec.captures().active() > 0;
    if (!x.capturing) {
        size_t free_bytes = 0, total_bytes = 0;
        bool ok = false;
        if (is_runtime(api)) {
            auto fn = r_cuda_mem_get_info.get();
            ok = fn && fn(&free_bytes, &total_bytes) == cudaSuccess;
        } else {
            auto fn = r_cu_mem_get_info.get();
            ok = fn && fn(&free_bytes, &total_bytes) == 0;
        }
        if (ok) {
            x.device_free = free_bytes;
            x.device_total = total_bytes;
            x.limit = total_bytes;
        }
    }
    x.stack_id = rec.intern_stack(ips, n);
    x.python_stack_id = rec.python_stack_id();
    rec.record_oom_context(x);
    rec.flush();
}

}  // namespace memguard::interpose

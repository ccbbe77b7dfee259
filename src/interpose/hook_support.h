// Pieces every hook file shares: exporting, finding the real function, keeping errno, the
// process-global (start-up and the recorder, runtime/process.h).
#pragma once

#include <cuda_runtime_api.h>

#include "common/errno_keeper.h"
#include "cuda/real.h"
#include "runtime/process.h"
#include "track/events.h"

#define MG_EXPORT extern "C" __attribute__((visibility("default")))

namespace memguard::interpose {

using cuda::kNoRuntime;
using ::memguard::ErrnoKeeper;
using runtime::ensure_initialized;

/// The stream argument of a call; `ptsz_call` for the per-thread-default-stream (_ptsz) variants.
inline track::StreamArg stream_arg(cudaStream_t s, bool ptsz_call) {
    return track::make_stream_arg(reinterpret_cast<uintptr_t>(s), ptsz_call);
}

/// True for the name of a _ptsz variant (a compile-time check on the hook's own name).
constexpr bool is_ptsz(const char* name) {
    const char* end = name;
    while (*end) ++end;
    return end - name > 5 && end[-5] == '_' && end[-4] == 'p' && end[-3] == 't' && end[-2] == 's' && end[-1] == 'z';
}

inline uintptr_t handle(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace memguard::interpose

/// Declares `fn`, the real function `name` with the given parameter types, inside a hook; returns
/// kNoRuntime from the hook when no loaded library defines it.
#define MG_REAL(name, ...)                                                           \
    static ::memguard::cuda::RealFunction<cudaError_t (*)(__VA_ARGS__)> real(#name); \
    auto fn = ::memguard::cuda::real_or_report(real);                                \
    if (!fn) return ::memguard::cuda::kNoRuntime

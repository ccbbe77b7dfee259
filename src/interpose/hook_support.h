// Pieces every hook file shares: exporting, finding the real function, keeping errno.
#pragma once

#include <cerrno>
#include <cuda_runtime_api.h>

#include "interpose/init.h"
#include "interpose/real.h"
#include "track/events.h"

#define MG_EXPORT extern "C" __attribute__((visibility("default")))

namespace memguard::interpose {

// Returned when no loaded library defines the real function (the caller reached our symbol
// without a CUDA runtime in the process).
constexpr cudaError_t kNoRuntime = cudaErrorSharedObjectSymbolNotFound;

template <typename Fn>
Fn real_or_report(RealFunction<Fn>& real) {
    Fn fn = real.get();
    if (!fn) report_missing(real.name());
    return fn;
}

inline track::StreamArg stream_arg(cudaStream_t s) { return track::StreamArg{true, reinterpret_cast<uintptr_t>(s)}; }

inline uintptr_t handle(const void* p) { return reinterpret_cast<uintptr_t>(p); }

/// Keeps errno as the host left it.
class ErrnoKeeper {
public:
    ErrnoKeeper() : saved_(errno) {}
    ~ErrnoKeeper() { errno = saved_; }

private:
    int saved_;
};

}  // namespace memguard::interpose

/// Declares `fn`, the real function `name` with the given parameter types, inside a hook; returns
/// kNoRuntime from the hook when no loaded library defines it.
#define MG_REAL(name, ...)                                                                    \
    static ::memguard::interpose::RealFunction<cudaError_t (*)(__VA_ARGS__)> real(#name);     \
    auto fn = ::memguard::interpose::real_or_report(real);                                    \
    if (!fn) return ::memguard::interpose::kNoRuntime

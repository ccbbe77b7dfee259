// The one door to the real CUDA functions: the interposition hooks (src/interpose) and allocator
// mode's device backend (src/allocmode) both reach the runtime and the driver through here, never
// through a link to them and never through memguard's own exported definitions.
//
// First dlsym(RTLD_NEXT): the next definition in the global lookup scope. When the runtime was
// loaded RTLD_LOCAL by an extension module (Python loads PyTorch this way), it is not in the global
// scope; then the loaded objects are searched one by one (dlopen with RTLD_NOLOAD on each, dlsym
// on that handle). A definition inside libmemguard.so itself is never returned.
#pragma once

#include <atomic>
#include <cuda_runtime_api.h>

namespace memguard::cuda {

/// Returned when no loaded library defines the real function (the caller reached memguard without
/// a CUDA runtime in the process).
constexpr cudaError_t kNoRuntime = cudaErrorSharedObjectSymbolNotFound;

/// The real definition of `name`, or nullptr when no loaded object defines it.
void* find_real(const char* name) noexcept;

/// A lazily resolved, cached pointer to the real function of type Fn.
template <typename Fn>
class RealFunction {
public:
    explicit constexpr RealFunction(const char* name) : name_(name) {}

    Fn get() noexcept {
        Fn fn = fn_.load(std::memory_order_acquire);
        if (fn) return fn;
        fn = reinterpret_cast<Fn>(find_real(name_));
        if (fn) fn_.store(fn, std::memory_order_release);
        return fn;
    }
    const char* name() const noexcept { return name_; }

private:
    const char* name_;
    std::atomic<Fn> fn_{nullptr};
};

/// Logs, once per name, that the real function could not be found.
void report_missing(const char* name) noexcept;

/// The real function, or nullptr after logging (once) that no loaded library defines it.
template <typename Fn>
Fn real_or_report(RealFunction<Fn>& real) noexcept {
    Fn fn = real.get();
    if (!fn) report_missing(real.name());
    return fn;
}

/// The real dlsym (glibc's), found without going through memguard's own dlsym
/// (interpose/lookup_hooks.cpp, which jumps to it for RTLD_DEFAULT and RTLD_NEXT).
void* real_dlsym(void* handle, const char* name) noexcept;

/// True when `p` lies in libmemguard.so's own code: a lookup that found one of memguard's
/// definitions found no real function.
bool is_ours(const void* p) noexcept;

}  // namespace memguard::cuda

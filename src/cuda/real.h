// Finding the real CUDA functions behind our interposed ones.
//
// First dlsym(RTLD_NEXT): the next definition in the global lookup scope. When the runtime was
// loaded RTLD_LOCAL by an extension module (Python loads PyTorch this way), it is not in the global
// scope; then the loaded objects are searched one by one (dlopen with RTLD_NOLOAD on each, dlsym
// on that handle). A definition inside libmemguard.so itself is never returned.
#pragma once

#include <atomic>

namespace memguard::interpose {

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

}  // namespace memguard::interpose

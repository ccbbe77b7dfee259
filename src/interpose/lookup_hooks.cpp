// The lookup paths to driver functions that are not plain symbol references:
//   - dlsym on a handle (PyTorch <= 2.8 and static cudart dlopen libcuda and dlsym from it);
//   - the runtime's cudaGetDriverEntryPoint / cudaGetDriverEntryPointByVersion (PyTorch >= 2.9)
//     and their _ptsz entry points;
//   - cuGetProcAddress itself is in driver_hooks.cpp.
// Each calls the real lookup with the caller's exact arguments; a returned pointer to a covered
// driver function is replaced by a wrapper bound to it (driver_table.h), anything else passes.
//
// dlsym. glibc's dlsym decides what RTLD_DEFAULT and RTLD_NEXT mean from its return address (the
// caller's object: RTLD_NEXT searches after it, RTLD_DEFAULT in its scope), and offers no public
// way to pass another caller. So memguard's dlsym is a few instructions of assembly: lookups with
// RTLD_DEFAULT or RTLD_NEXT jump (not call) to the real dlsym, which then sees the original
// return address and behaves exactly as if memguard were not there. Those lookups need no
// wrapping: the global scope already finds memguard's exported driver functions first. Lookups on
// a real handle do not depend on the caller, so a C++ function calls the real dlsym for them and
// inspects the result. The real dlsym is found with dlvsym(RTLD_NEXT, "dlsym", version), public
// glibc API: GLIBC_2.34 (libc.so.6 since 2.34), else GLIBC_2.2.5 (libdl of older glibc).
//
// Only x86-64 has the jump; elsewhere memguard does not define dlsym (lookups through dlsym on a
// handle are then not covered).
//
// The real dlsym and its resolution (mg_real_dlsym_ptr, mg_resolve_real_dlsym, which the
// assembly below reads and calls) are the CUDA door's (cuda/real.cpp).
#include "interpose/driver_table.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "interpose/hook_support.h"

using memguard::interpose::ErrnoKeeper;

extern "C" {
/// dlsym on a real handle (the assembly jumps here for anything but RTLD_DEFAULT and RTLD_NEXT).
__attribute__((visibility("hidden"))) void* mg_dlsym_handle(void* handle, const char* name) {
    void* p = memguard::cuda::real_dlsym(handle, name);
    if (p && name && name[0] == 'c' && name[1] == 'u') {
        memguard::interpose::Variant v;
        if (memguard::interpose::variant_by_symbol(name, &v)) {
            ErrnoKeeper keep_errno;
            p = memguard::interpose::bind_variant(v, p);
        }
    }
    return p;
}
}

#if defined(__x86_64__)
// RTLD_DEFAULT is 0 and RTLD_NEXT is -1 on glibc.
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    endbr64
    testq %rdi, %rdi
    je 1f
    cmpq $-1, %rdi
    je 1f
    jmp mg_dlsym_handle
1:
    movq mg_real_dlsym_ptr(%rip), %rax
    testq %rax, %rax
    je 2f
    jmp *%rax
2:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call mg_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    je 3f
    jmp *%rax
3:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#endif

namespace memguard::interpose {
namespace {

int runtime_version() {
    static std::atomic<int> cached{0};
    int v = cached.load(std::memory_order_relaxed);
    if (v) return v;
    static cuda::RealFunction<cudaError_t (*)(int*)> get_version("cudaRuntimeGetVersion");
    auto fn = get_version.get();
    if (!fn || fn(&v) != cudaSuccess || v <= 0) v = CUDART_VERSION;
    cached.store(v, std::memory_order_relaxed);
    return v;
}

/// Whether the runtime selects per-thread-default-stream variants: asked for, or the _ptsz entry
/// point with the default mode.
bool per_thread(unsigned long long flags, bool ptsz_entry) {
    if (flags & cudaEnablePerThreadDefaultStream) return true;
    return ptsz_entry && !(flags & cudaEnableLegacyStream);
}

}  // namespace
}  // namespace memguard::interpose

// --- the runtime's entry-point functions --------------------------------------------------------
extern "C" {
cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus);
}

#define MG_ENTRY_POINT(name)                                                                                          \
    MG_EXPORT cudaError_t name(const char* symbol, void** funcPtr, unsigned long long flags,                          \
                               cudaDriverEntryPointQueryResult* driverStatus) {                                       \
        MG_REAL(name, const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);                     \
        cudaError_t err = fn(symbol, funcPtr, flags, driverStatus);                                                   \
        if (err == cudaSuccess && funcPtr && *funcPtr) {                                                              \
            ErrnoKeeper keep_errno;                                                                                   \
            auto relookup = [&](const char* other) -> void* {                                                         \
                void* p = nullptr;                                                                                    \
                cudaDriverEntryPointQueryResult st;                                                                   \
                return fn(other, &p, flags, &st) == cudaSuccess ? p : nullptr;                                        \
            };                                                                                                        \
            *funcPtr = memguard::interpose::wrap_lookup(symbol, memguard::interpose::runtime_version(),               \
                                                        memguard::interpose::per_thread(flags,                        \
                                                                                        memguard::interpose::is_ptsz( \
                                                                                            #name)),                  \
                                                        *funcPtr, relookup);                                          \
        }                                                                                                             \
        return err;                                                                                                   \
    }
MG_ENTRY_POINT(cudaGetDriverEntryPoint)
MG_ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)

#define MG_ENTRY_POINT_BY_VERSION(name)                                                                                \
    MG_EXPORT cudaError_t name(const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags, \
                               cudaDriverEntryPointQueryResult* driverStatus) {                                        \
        MG_REAL(name, const char*, void**, unsigned int, unsigned long long, cudaDriverEntryPointQueryResult*);        \
        cudaError_t err = fn(symbol, funcPtr, cudaVersion, flags, driverStatus);                                       \
        if (err == cudaSuccess && funcPtr && *funcPtr) {                                                               \
            ErrnoKeeper keep_errno;                                                                                    \
            auto relookup = [&](const char* other) -> void* {                                                          \
                void* p = nullptr;                                                                                     \
                cudaDriverEntryPointQueryResult st;                                                                    \
                return fn(other, &p, cudaVersion, flags, &st) == cudaSuccess ? p : nullptr;                            \
            };                                                                                                         \
            *funcPtr = memguard::interpose::wrap_lookup(symbol, static_cast<int>(cudaVersion),                         \
                                                        memguard::interpose::per_thread(flags,                         \
                                                                                        memguard::interpose::is_ptsz(  \
                                                                                            #name)),                   \
                                                        *funcPtr, relookup);                                           \
        }                                                                                                              \
        return err;                                                                                                    \
    }
MG_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
MG_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)

// A program that interposes a function itself with dlsym(RTLD_NEXT, ...), and a plugin it
// dlopen()s with RTLD_LOCAL that looks symbols up with RTLD_NEXT and RTLD_DEFAULT. glibc resolves
// both handles relative to the calling object, so under memguard (which defines dlsym) each
// lookup must find what it finds without memguard, except where memguard's own exported
// definition is legitimately next. Log: `next <where> <symbol> <module basename|none>`.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include <cuda_runtime_api.h>

std::string module_of(const void* p) {
    Dl_info info{};
    if (!p || !dladdr(p, &info) || !info.dli_fname) return "none";
    std::string f = info.dli_fname;
    return f.substr(f.find_last_of('/') + 1);
}

// The program's own cudaMalloc (exported: the app is linked with ENABLE_EXPORTS), forwarding to
// the next definition as an interposer does. The program does not link the CUDA runtime.
extern "C" __attribute__((visibility("default"))) cudaError_t cudaMalloc(void** p, size_t size) {
    using Fn = cudaError_t (*)(void**, size_t);
    static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "cudaMalloc"));
    return next ? next(p, size) : cudaErrorInitializationError;
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc < 2) return 2;
    std::printf("next main cudaMalloc %s\n", module_of(dlsym(RTLD_NEXT, "cudaMalloc")).c_str());
    std::printf("default main cudaMalloc %s\n", module_of(dlsym(RTLD_DEFAULT, "cudaMalloc")).c_str());
    std::printf("next main puts %s\n", module_of(dlsym(RTLD_NEXT, "puts")).c_str());
    void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        std::fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 3;
    }
    using Probe = void (*)(void (*)(const char*, const char*, const void*));
    auto probe = reinterpret_cast<Probe>(dlsym(plugin, "next_plugin_probe"));
    if (!probe) return 4;
    probe([](const char* where, const char* symbol, const void* p) {
        std::printf("%s plugin %s %s\n", where, symbol, module_of(p).c_str());
    });
    // A failed lookup leaves its message for dlerror, as without memguard.
    void* missing = dlsym(RTLD_DEFAULT, "no_such_symbol_anywhere");
    const char* error = dlerror();
    std::printf("missing %s %s\n", missing ? "found" : "null", error ? "error" : "no-error");
    void* missing_in_handle = dlsym(plugin, "cuNoSuchFunction");
    error = dlerror();
    std::printf("missing-handle %s %s\n", missing_in_handle ? "found" : "null", error ? "error" : "no-error");
    return 0;
}

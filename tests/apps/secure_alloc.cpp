// Run setuid root by an unprivileged user (preload test SecureExecution): a secure-execution
// process (AT_SECURE), whose environment is the unprivileged user's. The loader ignores LD_PRELOAD
// paths with a slash there, so the program loads libmemguard.so itself (argv[1], an absolute path;
// "-": not at all), then allocates and frees through memguard's exported cudaMalloc and cudaFree
// (the runtime's own without memguard), as a program with the library preloaded would.
//
// Logs `info at_secure <n>`, `info euid <n>`, the results of the calls and
// `info nvtx_env <value|unset>`.
#include "app_common.h"

#include <dlfcn.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstring>

namespace {

constexpr size_t k_secure_block = 1'700'003;

using MallocFn = cudaError_t (*)(void**, size_t);
using FreeFn = cudaError_t (*)(void*);

}  // namespace

int main(int argc, char** argv) {
    app::init_log();
    if (argc != 2) {
        std::fprintf(stderr, "usage: secure_alloc LIBMEMGUARD|-\n");
        return 2;
    }
    std::printf("info at_secure %lu\n", getauxval(AT_SECURE));
    std::printf("info euid %u\n", static_cast<unsigned>(geteuid()));
    MallocFn malloc_fn = &cudaMalloc;
    FreeFn free_fn = &cudaFree;
    if (std::strcmp(argv[1], "-") != 0) {
        void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
            return 1;
        }
        malloc_fn = reinterpret_cast<MallocFn>(dlsym(h, "cudaMalloc"));
        free_fn = reinterpret_cast<FreeFn>(dlsym(h, "cudaFree"));
        if (!malloc_fn || !free_fn) {
            std::fprintf(stderr, "libmemguard.so exports no cudaMalloc/cudaFree\n");
            return 1;
        }
    }
    void* ptr = nullptr;
    app::expect("cudaMalloc", malloc_fn(&ptr, k_secure_block), cudaSuccess);
    app::expect("cudaFree", free_fn(ptr), cudaSuccess);
    const char* nvtx = std::getenv("NVTX_INJECTION64_PATH");
    std::printf("info nvtx_env %s\n", nvtx ? nvtx : "unset");
    return 0;
}

// Loads libmemguard.so with dlopen after the program started (argv[1] is its path), the way
// torch.cuda.memory.CUDAPluggableAllocator loads it with ctypes in allocator mode by hand, and
// calls memguard_version through it. A library whose initial-exec thread-local data exceeds the
// static TLS that glibc keeps for dlopen fails here with "cannot allocate memory in static TLS
// block". Prints `result dlopen 0` and `info version <v>` on success.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::printf("result dlopen 1\n");
        std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
        return 1;
    }
    auto version = reinterpret_cast<const char* (*)()>(dlsym(h, "memguard_version"));
    std::printf("result dlopen 0\ninfo version %s\n", version ? version() : "?");
    // Loaded into a running program, the library leaves the environment alone (NVTX injection is
    // only set up by a preloaded copy, whose constructor runs before any thread exists).
    const char* nvtx = std::getenv("NVTX_INJECTION64_PATH");
    std::printf("info nvtx_env %s\n", nvtx ? nvtx : "unset");
    return version ? 0 : 1;
}

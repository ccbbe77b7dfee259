// Loads a CUDA-using plugin the way Python loads PyTorch: dlopen(RTLD_LOCAL | RTLD_NOW), so the
// runtime the plugin links is not in the global scope. This program does not link libcudart.
//
//   dlopen_local <path of libmg_dl_worker.so>
#include <dlfcn.h>

#include <cstdio>

namespace {

// True when the fake runtime's own symbol can be found in the global scope.
bool cudart_is_global() { return dlsym(RTLD_DEFAULT, "fakecuda_alloc_count") != nullptr; }

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc != 2) {
        std::fprintf(stderr, "usage: dlopen_local <plugin.so>\n");
        return 2;
    }
    std::printf("info cudart_global_before %d\n", cudart_is_global() ? 1 : 0);
    void* plugin = dlopen(argv[1], RTLD_LOCAL | RTLD_NOW);
    if (plugin == nullptr) {
        std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
        return 3;
    }
    std::printf("info cudart_global_after %d\n", cudart_is_global() ? 1 : 0);
    auto run = reinterpret_cast<int (*)()>(dlsym(plugin, "worker_run"));
    if (run == nullptr) {
        std::fprintf(stderr, "dlsym(worker_run) failed: %s\n", dlerror());
        return 4;
    }
    int result = run();
    // Like Python, the plugin is never unloaded.
    return result;
}

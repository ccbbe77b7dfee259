// Loaded RTLD_LOCAL by dlsym_next; links the (fake) CUDA runtime, which is therefore in this
// plugin's local scope only, not in the global one.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) void next_plugin_probe(void (*report)(const char* where,
                                                                                        const char* symbol,
                                                                                        const void* p)) {
    // A reference to the runtime, so that it is a dependency of this plugin.
    int version = 0;
    (void)cudaRuntimeGetVersion(&version);
    // RTLD_NEXT from here: the objects after this plugin in its own scope (the runtime).
    report("next", "cudaMalloc", dlsym(RTLD_NEXT, "cudaMalloc"));
    // RTLD_DEFAULT from here: the global scope, then this plugin's local scope.
    report("default", "fakecuda_alloc_count", dlsym(RTLD_DEFAULT, "fakecuda_alloc_count"));
}

// Allocates (one block left live, one pinned block freed) and ends with a distinctive exit code.
//
//   exit_code return   returns k_exit_code from main (the default)
//   exit_code exit     calls exit(k_exit_code)
//   exit_code _exit    calls _exit(k_exit_code), skipping atexit handlers and destructors
#include "app_common.h"
#include "app_sizes.h"

#include <unistd.h>

#include <cstring>

using namespace app_sizes;

APP_FN void* exit_code_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, 0, __func__);
    return ptr;
}

APP_FN void exit_code_pinned(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMallocHost", cudaMallocHost(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMallocHost", ptr, size, nullptr, false, -1, __func__);
    app::expect("cudaFreeHost", cudaFreeHost(ptr), cudaSuccess);
    app::log_free("cudaFreeHost", ptr, nullptr, false);
}

int main(int argc, char** argv) {
    app::init_log();
    const char* mode = argc > 1 ? argv[1] : "return";
    exit_code_alloc(k_exec_child);
    exit_code_pinned(k_exec_child_pinned);
    std::printf("exit_code: done, leaving with %d via %s\n", k_exit_code, mode);
    if (std::strcmp(mode, "exit") == 0) std::exit(k_exit_code);
    if (std::strcmp(mode, "_exit") == 0) {
        std::fflush(stdout);
        _exit(k_exit_code);
    }
    return k_exit_code;
}

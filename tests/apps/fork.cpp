// The parent allocates, forks; the child allocates and ends; the parent allocates again, frees
// and waits for the child.
//
//   fork exit    the child ends with exit(0) right after allocating
//   fork _exit   the child sleeps 2 s (past a flush) and ends with _exit(0)
#include "app_common.h"
#include "app_sizes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

using namespace app_sizes;

APP_FN void* parent_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, 0, __func__);
    return ptr;
}

APP_FN void* child_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, 0, __func__);
    return ptr;
}

[[noreturn]] void run_child(bool use_exit) {
    child_alloc(k_child);
    if (use_exit) std::exit(0);
    sleep(2);
    _exit(0);
}

int main(int argc, char** argv) {
    app::init_log();
    if (argc != 2 || (std::strcmp(argv[1], "exit") != 0 && std::strcmp(argv[1], "_exit") != 0)) {
        std::fprintf(stderr, "usage: fork exit|_exit\n");
        return 2;
    }
    bool use_exit = std::strcmp(argv[1], "exit") == 0;
    app::log_info("parent_pid", static_cast<unsigned long long>(getpid()));
    void* before = parent_alloc(k_parent_before_fork);

    std::fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        std::perror("fork");
        return 3;
    }
    if (child == 0) run_child(use_exit);
    app::log_info("child_pid", static_cast<unsigned long long>(child));

    void* after = parent_alloc(k_parent_after_fork);
    app::expect("cudaFree", cudaFree(before), cudaSuccess);
    app::log_free("cudaFree", before, nullptr, false);
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
        std::perror("waitpid");
        return 4;
    }
    app::log_info("child_status", static_cast<unsigned long long>(status));
    app::expect("cudaFree", cudaFree(after), cudaSuccess);
    app::log_free("cudaFree", after, nullptr, false);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 5;
}

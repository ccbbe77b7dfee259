// The parent allocates, forks, and the child exec()s another CUDA program (exit_code, which
// allocates and exits with k_exit_code); the parent frees and checks the child's exit code.
//
//   fork_exec <path of exit_code>
#include "app_common.h"
#include "app_sizes.h"

#include <sys/wait.h>
#include <unistd.h>

using namespace app_sizes;

APP_FN void* parent_alloc(size_t size) {
    void* ptr = nullptr;
    app::expect("cudaMalloc", cudaMalloc(&ptr, size), cudaSuccess);
    app::log_alloc("cudaMalloc", ptr, size, nullptr, false, 0, __func__);
    return ptr;
}

int main(int argc, char** argv) {
    app::init_log();
    if (argc != 2) {
        std::fprintf(stderr, "usage: fork_exec <program>\n");
        return 2;
    }
    app::log_info("parent_pid", static_cast<unsigned long long>(getpid()));
    void* block = parent_alloc(k_parent_before_fork);

    std::fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        std::perror("fork");
        return 3;
    }
    if (child == 0) {
        char* child_argv[] = {argv[1], const_cast<char*>("return"), nullptr};
        execv(argv[1], child_argv);
        _exit(127);
    }
    app::log_info("child_pid", static_cast<unsigned long long>(child));
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
        std::perror("waitpid");
        return 4;
    }
    app::log_info("child_status", static_cast<unsigned long long>(status));
    app::expect("cudaFree", cudaFree(block), cudaSuccess);
    app::log_free("cudaFree", block, nullptr, false);
    return WIFEXITED(status) && WEXITSTATUS(status) == k_exit_code ? 0 : 5;
}

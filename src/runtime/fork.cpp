#include "runtime/fork.h"

#include <atomic>
#include <pthread.h>

#include "allocmode/tracking_allocator.h"
#include "common/errno_keeper.h"
#include "common/log.h"
#include "python/hook.h"
#include "runtime/process.h"

namespace memguard::runtime {

std::mutex g_vmm_order;

namespace {

std::atomic<bool> g_recording{false};

void before_fork() {
    allocmode::lock_for_fork();
    g_vmm_order.lock();
    // The Python stack tables' lock before the recorder's: the stack provider appends its p/P
    // records (writer buffer) while holding it.
    python::prepare_fork();
    if (g_recording.load(std::memory_order_acquire)) recorder().before_fork();
}

void after_fork_parent() {
    if (g_recording.load(std::memory_order_acquire)) recorder().after_fork_parent();
    python::after_fork_parent();
    g_vmm_order.unlock();
    allocmode::unlock_after_fork();
}

void after_fork_child() {
    if (g_recording.load(std::memory_order_acquire)) recorder().after_fork_child();
    python::after_fork_child();
    g_vmm_order.unlock();
    allocmode::unlock_after_fork();
}

}  // namespace

void register_fork_handlers(bool recording) noexcept {
    g_recording.store(recording, std::memory_order_release);
    ErrnoKeeper keep_errno;
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0) {
        MG_LOG_WARN("cannot register fork handlers; a fork while another thread allocates may hang the child");
    }
}

}  // namespace memguard::runtime

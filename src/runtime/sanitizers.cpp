// What libmemguard.so tells a ThreadSanitizer runtime in the host program (docs/security.md, "Kept in CI").
//
// The library is not instrumented, so TSan sees only what its interceptors see (memcpy, realloc,
// write(2), ...) and none of memguard's own ordering: the report buffer's futex lock
// (common/futex_lock.h) and the lock-free atomics. It reported the buffer's copies, its growth and
// the writer thread's write(2) as data races and ended the host with exit code 66. TSan's runtime
// asks for default suppressions through this weak hook, and libtsan.so calls it through its PLT, so
// with the library preloaded the call reaches this definition: races with a frame in
// libmemguard.so are not reported. A program's own definition comes first in lookup order and
// replaces this one; clang's runtime, linked into the program, calls its own (docs/security.md, "Kept in CI"
// has the suppression file for both). Telling TSan of each acquire and release instead
// (__tsan_acquire/__tsan_release behind a weak-symbol test in FutexLock) cost every process 64
// instructions per allocation and 67 per free (callgrind, allocator mode): the inliner stopped
// inlining the buffer's append.
//
// A library built with -fsanitize=thread (the TSan job of .ci/run) is seen whole by TSan and needs
// no suppression: there the races it would find are real.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MG_TSAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define MG_TSAN_BUILD 1
#endif

#ifndef MG_TSAN_BUILD
extern "C" __attribute__((visibility("default"))) const char* __tsan_default_suppressions() {
    return "race:libmemguard.so\n";
}
#endif

/* memguard's public C API. The preload library (libmemguard.so) exports these functions next to
 * the CUDA functions it interposes. Programs may call them through dlsym(RTLD_DEFAULT, ...) so
 * that they keep working when memguard is not preloaded. */
#ifndef MEMGUARD_MEMGUARD_H
#define MEMGUARD_MEMGUARD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMGUARD_VERSION_STRING "0.1.0"

/** The library's version, e.g. "0.1.0". */
const char* memguard_version(void);

/** 1 when memguard records this process's CUDA allocations, 0 when it only passes calls through
 *  (MEMGUARD_ENABLE=0, the report could not be created, or the process is exiting). */
int memguard_active(void);

/** Writes every record buffered so far to the report now. Returns 0, or -1 when no report is open. */
int memguard_flush(void);

/** Copies the path of this process's report (NUL-terminated, cut to len) into buf. Returns the
 *  length of the full path, or 0 when no report has been created yet. */
size_t memguard_report_path(char* buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* MEMGUARD_MEMGUARD_H */

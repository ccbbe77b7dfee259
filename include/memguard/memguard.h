/* memguard's public C API. The preload library (libmemguard.so) exports these functions next to
 * the CUDA functions it interposes. Programs may call them through dlsym(RTLD_DEFAULT, ...) so
 * that they keep working when memguard is not preloaded. */
#ifndef MEMGUARD_MEMGUARD_H
#define MEMGUARD_MEMGUARD_H

#include <stddef.h>
#include <stdint.h>

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

/** Phases: named spans of the run; for each the report gives the GPU bytes live at its begin, its
 *  peak and its incremental peak (peak minus entry). Phases may nest, and may overlap when begun
 *  on different threads: a phase is ended by its id, not by its name.
 *
 *  memguard_phase_begin begins a phase named `name` (UTF-8; NULL is an empty name) and returns
 *  its id, or 0 when memguard does not record (then memguard_phase_end(0) does nothing). A phase
 *  begun before the process's first CUDA allocation is kept in memory and written once the report
 *  exists; a process that never allocates CUDA memory writes no report, phases or not. */
uint64_t memguard_phase_begin(const char* name);

/** Ends the phase `id` returned by memguard_phase_begin, from any thread. Ids that are not open
 *  (0, unknown, already ended, begun in the parent before a fork) are ignored. */
void memguard_phase_end(uint64_t id);

/** Records a mark: an instant event named `name` (UTF-8; NULL is an empty name). */
void memguard_mark(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* MEMGUARD_MEMGUARD_H */

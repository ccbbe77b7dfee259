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

/** In-process statistics, for tests and gates that check memory as the program runs (the pytest
 *  plugin's markers). Fields may be added at the end in later versions: callers pass the size of
 *  the struct they were compiled with, and only that much is written. */
typedef struct memguard_stats {
    /** The bytes the report's phases count: in allocator mode (MEMGUARD_ALLOCATOR=memguard) the
     *  tensor blocks of memguard's allocator (torch.cuda.memory_allocated()), else the GPU blocks
     *  below. peak_bytes: the most at once since the last memguard_reset_peak (or the start). */
    uint64_t live_bytes, peak_bytes;
    /** GPU memory (device, async and managed blocks) memguard's hooks saw allocated and not yet
     *  freed: with PyTorch's own allocator its cached segments, in allocator mode memguard's. */
    uint64_t gpu_live_bytes, gpu_peak_bytes;
    /** Garbage collections recorded so far (Python), those of them that freed CUDA memory, and the
     *  CUDA bytes those freed (the report's cuda_bytes_freed, positive ones summed). */
    uint64_t gc_collections, gc_freeing_collections, gc_cuda_bytes_freed;
    /** 1 in allocator mode, else 0. */
    int32_t allocator_mode;
    int32_t reserved_;
} memguard_stats_t;

/** Fills `out` (its first `size` bytes: pass sizeof(memguard_stats_t)) with the counters of CUDA
 *  device `device`, or of every device when it is -1 (sums; the peaks are each device's own peak,
 *  summed). Returns 0, or -1 with *out zeroed when memguard does not record. Reads counters the
 *  hooks keep anyway (relaxed atomics); takes no lock a hook takes. */
int memguard_stats(int device, memguard_stats_t* out, size_t size);

/** Starts new peaks at the bytes live now, on `device` or on every device (-1). In allocator mode
 *  this is also PyTorch's peak (torch.cuda.reset_peak_memory_stats resets the same counters). */
void memguard_reset_peak(int device);

#ifdef __cplusplus
}
#endif

#endif /* MEMGUARD_MEMGUARD_H */

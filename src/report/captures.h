// Figures about stream captures, CUDA graphs and hazards (format minor 1): what each capture owns
// and whether its graph and execs are gone, and the warm-up retention per capture boundary.
#pragma once

#include <cstdint>
#include <vector>

#include "report/report.h"

namespace memguard::report {

struct CaptureStats {
    const Capture* capture = nullptr;
    std::vector<size_t> execs;  // indices into Report::execs of the G records naming this capture
    uint64_t launches = 0;      // L records of those execs
    uint64_t owned_bytes = 0;   // every block (any kind) and handle whose capture_id is this capture
    uint64_t owned_blocks = 0;
    uint64_t live_owned_bytes_at_exit = 0;  // of those, the ones never freed
    uint64_t live_owned_blocks_at_exit = 0;
    // Physical handles (N records, minor 3) created during the capture count as owned like blocks:
    // their bytes are in owned_bytes and live_owned_bytes_at_exit.
    uint64_t owned_handles = 0;
    uint64_t live_owned_handles_at_exit = 0;  // whose memory still exists at the end
    // Allocator mode (T records, minor 5): the tensor blocks the capture's stream or thread got
    // from its private pool (the T's capture_id); they lie inside the owned segments above.
    uint64_t owned_tensor_bytes = 0;
    uint64_t owned_tensor_blocks = 0;
    uint64_t live_owned_tensor_bytes_at_exit = 0;
    uint64_t live_owned_tensor_blocks_at_exit = 0;
    bool graph_alive_at_exit = false;  // the captured graph had no K record
    uint64_t execs_alive_at_exit = 0;  // execs without a D record
    /// Nothing of the capture is left: it ended, its graph (if it produced one) was destroyed, and
    /// every exec instantiated from it was destroyed.
    bool destroyed = false;
};

/// One entry per capture (C record), by capture id.
std::vector<CaptureStats> capture_stats(const Report& r);

struct RetentionSite {
    uint32_t stack_id = 0;
    uint64_t blocks = 0;
    uint64_t bytes = 0;
};

/// The warmup_retention records of one capture boundary (capture, phase), merged.
struct RetentionBoundary {
    uint32_t capture_id = 0;
    CapturePhase phase = CapturePhase::Begin;
    int64_t t = 0;      // of its first record
    int64_t since = 0;  // the start of the window: the end of the previous capture, or 0
    uint64_t bytes = 0;
    uint64_t blocks = 0;
    std::vector<RetentionSite> sites;  // by bytes, then blocks, descending; then by stack id
};

/// The capture boundaries with retained warm-up memory, biggest first (bytes, then blocks,
/// descending; then by time, capture id and phase).
std::vector<RetentionBoundary> retention_boundaries(const Report& r);

}  // namespace memguard::report

// The exports of `memguard export`: the memory snapshot that PyTorch's memory_viz reads, a
// Chrome trace-event file for Perfetto, and JSON lines for a query engine.
#pragma once

#include <string>
#include <vector>

#include "report/report.h"

namespace memguard::cli {

/// The snapshot pickle (torch.cuda.memory._snapshot() schema): in interposition mode every GPU block
/// is a segment holding one block; the traces have its alloc and free; frames are symbolized. In
/// allocator mode the tensor blocks are the allocations in the allocator's segments; what a report
/// that lost records made inconsistent is left out or ended early, and said in *notes.
std::string memory_viz_pickle(const report::Report& r, size_t max_frames, std::vector<std::string>* notes = nullptr);

/// JSON lines (docs/fleet-export.md): the rank summary, every site at the peak (described by up to
/// `frames` frames of each kind), every phase and every step, one object per line.
std::string jsonl_export(const report::Report& r, size_t frames);

/// Chrome trace-event JSON: counters of GPU memory, slices of phases, captures and collections,
/// instants of compiles and marks.
std::string perfetto_json(const report::Report& r);

}  // namespace memguard::cli

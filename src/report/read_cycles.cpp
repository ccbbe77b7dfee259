// The reader's cycles records (docs/report-format.md, minor 9): explanations of what one of
// memguard's collections found in its garbage (j, u, y, r), attached to the Y that names them. The
// writer's side is track/records_cycles.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::Explanation& r) {
    if (explanations_.count(r.explain) != 0) {
        warn("dup-explain",
             "explanation " + std::to_string(r.explain) + " begun twice; the second j record is ignored");
        return;
    }
    Explanation e;
    e.id = r.explain;
    e.t = r.t;
    e.tid = r.tid;
    e.objects = r.objects;
    e.tensors = r.tensors;
    e.cuda_bytes = r.cuda_bytes;
    e.analysis_ns = r.analysis_ns;
    e.complete = r.complete;
    explanations_[e.id] = report_.explanations.size();
    report_.explanations.push_back(std::move(e));
}

namespace {
/// The open explanation `id` (its Y not read yet), or null.
Explanation* open_explanation(std::unordered_map<uint32_t, size_t>& ids, std::vector<Explanation>& all, uint32_t id) {
    return find_open(ids, all, id, [](const Explanation& e) { return e.collection.has_value(); });
}
}  // namespace

void Parser::apply(const rec::GarbageGroup& r) {
    Explanation* e = open_explanation(explanations_, report_.explanations, r.explain);
    if (e == nullptr) {
        warn("unknown-explain",
             "u record names explanation " + std::to_string(r.explain) + ", which is not open; ignored");
        return;
    }
    e->groups.push_back(GarbageGroup{r.kind, r.count, r.cuda_bytes, std::string(r.name)});
}

void Parser::apply(const rec::GarbageTensor& r) {
    Explanation* e = open_explanation(explanations_, report_.explanations, r.explain);
    if (e == nullptr) {
        warn("unknown-explain",
             "y record names explanation " + std::to_string(r.explain) + ", which is not open; ignored");
        return;
    }
    GarbageTensor g;
    g.device = r.device;
    g.addr = r.addr;
    g.size = r.size;
    g.how = r.how;
    g.category = r.category;
    if (r.holder) g.holder = std::string(*r.holder);
    // Where it was allocated: the live tensor at the address (allocator mode), else the live
    // block of the device that contains it (interposition mode: PyTorch's segment).
    if (const size_t* t = live_tensors_.find(r.addr)) {
        g.stack_id = report_.tensors[*t].stack_id;
        g.python_stack_id = report_.tensors[*t].python_stack_id;
    } else {
        // Of the live blocks that contain it (one, unless blocks overlap), the earliest allocated.
        const Block* found = nullptr;
        blocks_at_.for_each([&](uint64_t, const AtAddr& at) {
            if (!at.live) return;
            const Block& b = report_.blocks[at.block];
            if (b.device == r.device && format::is_gpu(b.kind) && r.addr >= b.addr && r.addr - b.addr < b.size &&
                (found == nullptr || b.order < found->order)) {
                found = &b;
            }
        });
        if (found != nullptr) {
            g.stack_id = found->stack_id;
            g.python_stack_id = found->python_stack_id;
            g.site_is_segment = true;
        }
    }
    e->storages.push_back(std::move(g));
}

void Parser::apply(const rec::ChainStep& r) {
    Explanation* e = open_explanation(explanations_, report_.explanations, r.explain);
    if (e == nullptr) {
        warn("unknown-explain",
             "r record names explanation " + std::to_string(r.explain) + ", which is not open; ignored");
        return;
    }
    std::vector<ChainLink>& chain = e->chains[r.addr];
    if (r.step != chain.size()) {
        warn("chain-order", "r record step " + std::to_string(r.step) + " of the chain to " + hex(r.addr) + " after " +
                                std::to_string(chain.size()) + " steps; ignored");
        return;
    }
    chain.push_back(ChainLink{std::string(r.object), r.edge ? std::string(*r.edge) : std::string()});
}

}  // namespace memguard::report

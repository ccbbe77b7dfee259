// The memory_viz snapshot (docs/architecture.md, "Views over time"). The viewer replays the traces
// backwards from `segments`, so `segments` is exactly what is live after the last event, and every
// trace entry pairs with it: an A becomes segment_alloc + alloc, an F free_requested +
// free_completed + segment_free, an R (a failed free) segment_alloc + alloc again. Memory mapped
// through the driver (a Q of a handle on a device: PyTorch's expandable segments) is exported the
// same way, one expandable segment per mapping, with the stack of the handle's N.
//
// In allocator mode (T records) the snapshot is what PyTorch's own allocator would give: the A/F
// blocks are the segments (segment_alloc, segment_free) and the tensor blocks the allocations in
// them (alloc at T; free_requested and free_completed at t); each segment at the end lists its live
// tensor blocks (active_allocated) and the gaps between them (inactive).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "export.h"
#include "report/pickle.h"
#include "sites.h"

namespace memguard::cli {

namespace {

/// Frames of one site as the viewer wants them (innermost first): native frames, with the Python
/// frames put where the interpreter's frame evaluation starts (as PyTorch's combined tracebacks do),
/// or after the native ones when no such frame was recorded.
class FrameLists {
public:
    FrameLists(const report::Report& r, size_t max_frames) : r_(r), sym_(r, max_frames) {}

    void add(uint32_t stack_id, uint32_t python_stack_id) {
        uint64_t key = (uint64_t{stack_id} << 32) | python_stack_id;
        if (handles_.count(key) == 0) handles_[key] = sym_.add(stack_id, python_stack_id);
    }
    void resolve() { sym_.resolve(); }

    /// Writes the frame list of a site; the first time it is memoized, later it is referenced.
    void write(report::PickleWriter& p, uint32_t stack_id, uint32_t python_stack_id) {
        uint64_t key = (uint64_t{stack_id} << 32) | python_stack_id;
        auto memo = memo_.find(key);
        if (memo != memo_.end()) {
            p.get(memo->second);
            return;
        }
        const SiteFrames& s = sym_.get(handles_.at(key));
        p.begin_list();
        bool python_done = s.python.empty();
        for (const report::Frame& f : s.native) {
            if (!python_done && f.function.rfind("_PyEval_EvalFrame", 0) == 0) {
                python_frames(p, s);
                python_done = true;
            }
            native_frame(p, f);
        }
        if (!python_done) python_frames(p, s);
        p.end_list();
        memo_[key] = p.memoize();
    }

private:
    static void frame(report::PickleWriter& p, const std::string& filename, int64_t line, const std::string& name) {
        p.begin_dict();
        p.str("filename").str(filename);
        p.str("line").integer(line);
        p.str("name").str(name);
        p.end_dict();
    }

    void native_frame(report::PickleWriter& p, const report::Frame& f) {
        std::string module = f.module ? f.module->path : "??";
        std::string name = !f.function.empty() ? f.function : f.module ? module + "+" + hex(f.offset) : hex(f.ip);
        frame(p, f.file.empty() ? module : f.file, f.line, name);
    }

    void python_frames(report::PickleWriter& p, const SiteFrames& s) {
        for (uint32_t id : s.python) {
            auto it = r_.python_frames.find(id);
            if (it == r_.python_frames.end()) {
                frame(p, "??", 0, "(Python frame " + std::to_string(id) + " not in the report)");
            } else {
                frame(p, it->second.filename, it->second.line, it->second.function);
            }
        }
    }

    const report::Report& r_;
    SiteSymbolizer sym_;
    std::map<uint64_t, size_t> handles_;
    std::map<uint64_t, uint32_t> memo_;
};

int64_t time_us(const report::Report& r, int64_t t) {
    auto it = r.info.find("t0_unix_ns");
    int64_t t0 = 0;
    if (it != r.info.end()) t0 = std::strtoll(it->second.c_str(), nullptr, 10);
    // t is within kMaxTimeNs, but the I record's t0 can be any number: summed in 128 bits.
    __extension__ const __int128 us = (static_cast<__int128>(t0) + t) / 1000;
    return us > INT64_MAX ? INT64_MAX : us < INT64_MIN ? INT64_MIN : static_cast<int64_t>(us);
}

/// What the export shows of a GPU block or of a mapping of device memory.
struct Item {
    uint64_t addr = 0, size = 0;
    int device = 0;
    uint64_t stream = 0;
    uint32_t stack_id = 0, python_stack_id = 0, capture_id = 0;
    bool expandable = false;
    uint64_t requested = 0;  // tensor blocks (allocator mode): what PyTorch asked for
    // Allocator segments: the pool of the tensor blocks in them (the T records' pool, which is
    // PyTorch's MempoolId_t; (0, 0) for the default pools), once one was seen.
    std::optional<std::pair<uint64_t, uint64_t>> pool = std::nullopt;
};

/// A T record's pool ("first.second", "-" for the default pools) as PyTorch's MempoolId_t.
std::optional<std::pair<uint64_t, uint64_t>> pool_id(const std::string& pool) {
    if (pool == "-") return std::make_pair(uint64_t{0}, uint64_t{0});
    const size_t dot = pool.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == pool.size()) return std::nullopt;
    const std::string a = pool.substr(0, dot), b = pool.substr(dot + 1);
    auto digits = [](const std::string& x) {
        return x.find_first_not_of("0123456789") == std::string::npos && x.size() <= 19;
    };
    if (!digits(a) || !digits(b)) return std::nullopt;
    return std::make_pair(std::stoull(a), std::stoull(b));
}

/// The item of an event, or nothing when the event is not exported: blocks of the GPU kinds on a
/// device, and mappings of handles on a device. Reservations and handles themselves are address
/// space and backing memory, which the viewer has no place for.
std::optional<Item> item_of(const report::Report& r, const report::Event& e) {
    Item it;
    if (e.is_block()) {
        const report::Block& b = r.blocks[e.block];
        if (!report::is_gpu(b.kind) || b.device < 0) return std::nullopt;
        it = Item{b.addr, b.size, b.device, b.stream.value_or(0), b.stack_id, b.python_stack_id, b.capture_id, false};
        return it;
    }
    if (e.type != report::Event::Map && e.type != report::Event::Unmap) return std::nullopt;
    const report::Mapping& m = r.mappings[e.block];
    if (!m.handle) return std::nullopt;
    const report::PhysicalHandle& h = r.handles[*m.handle];
    if (h.device < 0) return std::nullopt;
    it = Item{m.va, m.size, h.device, 0, h.stack_id, h.python_stack_id, h.capture_id, true};
    return it;
}

bool adds(const report::Event& e) {
    return e.type == report::Event::Alloc || e.type == report::Event::Restore || e.type == report::Event::Map;
}

void trace_entry(report::PickleWriter& p, FrameLists& frames, const report::Report& r, const Item& b,
                 const char* action, int64_t t) {
    p.begin_dict();
    p.str("action").str(action);
    p.str("addr").uinteger(b.addr);
    p.str("size").uinteger(b.size);
    p.str("stream").uinteger(b.stream);
    p.str("time_us").integer(time_us(r, t));
    p.str("frames");
    frames.write(p, b.stack_id, b.python_stack_id);
    p.end_dict();
}

void segment(report::PickleWriter& p, FrameLists& frames, const Item& b) {
    p.begin_dict();
    p.str("device").integer(b.device);
    p.str("address").uinteger(b.addr);
    p.str("total_size").uinteger(b.size);
    p.str("allocated_size").uinteger(b.size);
    p.str("active_size").uinteger(b.size);
    p.str("requested_size").uinteger(b.size);
    p.str("stream").uinteger(b.stream);
    p.str("segment_type").str("large");
    p.str("segment_pool_id").integer(b.capture_id).integer(0).tuple2();
    p.str("is_expandable").boolean(b.expandable);
    p.str("frames");
    frames.write(p, b.stack_id, b.python_stack_id);
    p.str("blocks").begin_list();
    p.begin_dict();
    p.str("address").uinteger(b.addr);
    p.str("size").uinteger(b.size);
    p.str("requested_size").uinteger(b.size);
    p.str("state").str("active_allocated");
    p.str("frames");
    frames.write(p, b.stack_id, b.python_stack_id);
    p.end_dict();
    p.end_list();
    p.end_dict();
}

void empty_frames(report::PickleWriter& p) { p.begin_list().end_list(); }

/// Allocator mode: one trace entry to write, and the state at the end of the trace.
struct TraceEntry {
    const char* action;
    Item item;
    int64_t t;
};
struct AllocatorState {
    // Per device that has entries: a report names devices up to report::kMaxDevice, and one that
    // names only device 1000 needs one trace, not a thousand.
    std::map<int, std::vector<TraceEntry>> traces;
    std::vector<Item> segments;  // the allocator's, live at the end, in order of allocation
    std::vector<Item> whole;     // other GPU memory live at the end: one block each
    std::vector<Item> tensors;   // live at the end
    uint64_t left_out = 0;       // tensor blocks in no live segment of their device
    uint64_t ended_early = 0;    // tensor blocks ended by an overlapping one or by their segment's free
};

/// The A blocks that are the allocator's segments: those a tensor block was handed out from. Other
/// GPU memory (a library's own cudaMalloc, say NCCL's) is exported as in interposition mode.
std::set<size_t> allocator_segments(const report::Report& r) {
    std::map<std::pair<int, uint64_t>, size_t> live;  // (device, address) -> A block index
    std::set<size_t> out;
    for (const report::Event& e : r.events) {
        if (e.type == report::Event::TensorAlloc) {
            const report::Tensor& t = r.tensors[e.block];
            auto it = live.upper_bound({t.device, t.addr});
            if (it == live.begin()) continue;
            --it;
            const report::Block& b = r.blocks[it->second];
            if (it->first.first == t.device && t.addr - b.addr < b.size) out.insert(it->second);
            continue;
        }
        if (!e.is_block()) continue;
        const report::Block& b = r.blocks[e.block];
        if (!report::is_gpu(b.kind) || b.device < 0) continue;
        if (adds(e)) {
            live[{b.device, b.addr}] = e.block;
        } else {
            live.erase({b.device, b.addr});
        }
    }
    return out;
}

/// Replays the segments (A/F) and tensor blocks (T/t) into trace entries the viewer accepts: a
/// tensor block is exported only inside a live segment of its device; a block that overlaps live
/// ones, or a segment that ends while blocks in it are live, ends them first (a report that lost
/// records can have either). Lookups are by (device, address), so a long run costs O(n log n).
AllocatorState allocator_state(const report::Report& r) {
    using Key = std::pair<int, uint64_t>;  // (device, address)
    using Live = std::pair<size_t, Item>;  // (index of its A or T record's block, the item)
    AllocatorState st;
    std::map<Key, Live> segs;                       // live segments
    std::vector<std::pair<size_t, Key>> seg_order;  // (A block index, key), in order of allocation
    std::map<Key, Live> tensors;                    // live exported tensor blocks
    std::map<size_t, Key> tensor_key;               // T index -> its key, while exported and live
    const std::set<size_t> ours = allocator_segments(r);
    std::map<std::pair<bool, size_t>, Item> whole;  // other GPU memory: (is a mapping, index) -> item
    std::vector<std::pair<bool, size_t>> whole_order;
    auto trace = [&](const char* action, const Item& it, int64_t t) {
        st.traces[it.device].push_back({action, it, t});
    };
    auto free_tensor = [&](std::map<Key, Live>::iterator it, int64_t t) {
        trace("free_requested", it->second.second, t);
        trace("free_completed", it->second.second, t);
        tensor_key.erase(it->second.first);
        return tensors.erase(it);
    };
    for (const report::Event& e : r.events) {
        if (e.type == report::Event::TensorFree) {
            auto k = tensor_key.find(e.block);
            if (k != tensor_key.end()) free_tensor(tensors.find(k->second), e.t);
            continue;
        }
        if (e.type == report::Event::TensorAlloc) {
            const report::Tensor& tb = r.tensors[e.block];
            Item it{tb.addr,
                    tb.size,
                    tb.device,
                    tb.stream,
                    tb.stack_id,
                    tb.python_stack_id,
                    tb.capture_id,
                    /*expandable=*/false,
                    tb.requested};
            const Key key{it.device, it.addr};
            auto seg = segs.upper_bound(key);  // then the segment at or below the address
            if (it.device < 0 || seg == segs.begin()) {
                ++st.left_out;
                continue;
            }
            Item& s = (--seg)->second.second;
            if (s.device != it.device || it.size > s.size || it.addr - s.addr > s.size - it.size) {
                ++st.left_out;
                continue;
            }
            if (!s.pool) s.pool = pool_id(tb.pool);
            // Live blocks it overlaps (their t was lost) end first, as the reader does for a T at a
            // live address.
            auto next = tensors.lower_bound(key);
            if (next != tensors.begin()) {
                auto prev = std::prev(next);
                if (prev->first.first == it.device && prev->first.second + prev->second.second.size > it.addr) {
                    free_tensor(prev, e.t);
                    ++st.ended_early;
                }
            }
            for (auto n = tensors.lower_bound(key);
                 n != tensors.end() && n->first.first == it.device && n->first.second < it.addr + it.size;) {
                n = free_tensor(n, e.t);
                ++st.ended_early;
            }
            tensors.emplace(key, Live{e.block, it});
            tensor_key[e.block] = key;
            trace("alloc", it, e.t);
            continue;
        }
        if (!e.is_block() || ours.count(e.block) == 0) {
            // Not the allocator's: one block per segment, as in interposition mode.
            std::optional<Item> it = item_of(r, e);
            if (!it) continue;
            const std::pair<bool, size_t> wkey{!e.is_block(), e.block};
            if (adds(e)) {
                if (!whole.emplace(wkey, *it).second) continue;
                whole_order.push_back(wkey);
                trace("segment_alloc", *it, e.t);
                trace("alloc", *it, e.t);
            } else if (whole.erase(wkey) != 0) {
                trace("free_requested", *it, e.t);
                trace("free_completed", *it, e.t);
                trace("segment_free", *it, e.t);
            }
            continue;
        }
        const report::Block& b = r.blocks[e.block];
        Item seg{b.addr,
                 b.size,
                 b.device,
                 b.stream.value_or(0),
                 b.stack_id,
                 b.python_stack_id,
                 b.capture_id,
                 /*expandable=*/false,
                 /*requested=*/b.size};
        const Key key{b.device, b.addr};
        if (adds(e)) {
            if (segs.emplace(key, Live{e.block, seg}).second) {
                seg_order.emplace_back(e.block, key);
                trace("segment_alloc", seg, e.t);
            }
            continue;
        }
        auto live = segs.find(key);
        if (live == segs.end() || live->second.first != e.block) continue;
        // Blocks still live in it end first.
        for (auto it = tensors.lower_bound(key);
             it != tensors.end() && it->first.first == b.device && it->first.second < b.addr + b.size;) {
            it = free_tensor(it, e.t);
            ++st.ended_early;
        }
        trace("segment_free", seg, e.t);
        segs.erase(live);
    }
    for (const auto& [index, key] : seg_order) {
        auto it = segs.find(key);
        if (it != segs.end() && it->second.first == index) st.segments.push_back(it->second.second);
    }
    for (const auto& key : whole_order) {
        auto it = whole.find(key);
        if (it != whole.end()) st.whole.push_back(it->second);
    }
    for (const auto& [key, live] : tensors) st.tensors.push_back(live.second);  // by (device, address)
    return st;
}

/// A segment at the end of the trace with its live tensor blocks (`tensors`: sorted by device and
/// address) and the inactive gaps between them.
void allocator_segment(report::PickleWriter& p, FrameLists& frames, const Item& seg, const std::vector<Item>& tensors) {
    auto first = std::lower_bound(tensors.begin(), tensors.end(), seg, [](const Item& a, const Item& b) {
        return a.device != b.device ? a.device < b.device : a.addr < b.addr;
    });
    std::vector<const Item*> in;
    uint64_t allocated = 0, requested = 0;
    for (auto t = first; t != tensors.end() && t->device == seg.device && t->addr < seg.addr + seg.size; ++t) {
        if (!in.empty() && t->addr < in.back()->addr + in.back()->size) continue;  // never after the replay
        in.push_back(&*t);
        allocated += t->size;
        requested += t->requested;
    }
    p.begin_dict();
    p.str("device").integer(seg.device);
    p.str("address").uinteger(seg.addr);
    p.str("total_size").uinteger(seg.size);
    p.str("allocated_size").uinteger(allocated);
    p.str("active_size").uinteger(allocated);
    p.str("requested_size").uinteger(requested);
    p.str("stream").uinteger(seg.stream);
    // memguard's allocator, like PyTorch's, takes 2 MiB segments for its small pool only.
    p.str("segment_type").str(seg.size <= (2u << 20) ? "small" : "large");
    if (seg.pool) {
        p.str("segment_pool_id").uinteger(seg.pool->first).uinteger(seg.pool->second).tuple2();
    } else {
        p.str("segment_pool_id").integer(seg.capture_id).integer(0).tuple2();
    }
    p.str("is_expandable").boolean(false);
    p.str("frames");
    frames.write(p, seg.stack_id, seg.python_stack_id);
    p.str("blocks").begin_list();
    auto gap = [&p](uint64_t addr, uint64_t size) {
        if (size == 0) return;
        p.begin_dict();
        p.str("address").uinteger(addr);
        p.str("size").uinteger(size);
        p.str("requested_size").uinteger(0);
        p.str("state").str("inactive");
        p.str("frames");
        empty_frames(p);
        p.end_dict();
    };
    uint64_t at = seg.addr;
    for (const Item* t : in) {
        gap(at, t->addr - at);
        p.begin_dict();
        p.str("address").uinteger(t->addr);
        p.str("size").uinteger(t->size);
        p.str("requested_size").uinteger(t->requested);
        p.str("state").str("active_allocated");
        p.str("frames");
        frames.write(p, t->stack_id, t->python_stack_id);
        p.end_dict();
        at = t->addr + t->size;
    }
    gap(at, seg.addr + seg.size - at);
    p.end_list();
    p.end_dict();
}

/// One replay serves both modes: without T records no segment is the allocator's, and every GPU
/// block is its own segment ("whole"), as interposition mode exports them.
std::string replayed_pickle(const report::Report& r, size_t max_frames, std::vector<std::string>* notes) {
    AllocatorState st = allocator_state(r);
    if (notes && st.left_out != 0) {
        notes->push_back(std::to_string(st.left_out) +
                         " tensor block(s) lie in no live segment of their device (the report lost records?): left out "
                         "of the memory snapshot");
    }
    if (notes && st.ended_early != 0) {
        notes->push_back(std::to_string(st.ended_early) +
                         " tensor block(s) still live when a block over them or their "
                         "segment's free came (the report lost records?): ended there in the memory snapshot");
    }
    FrameLists frames(r, max_frames);
    for (const auto& [device, trace] : st.traces)
        for (const TraceEntry& e : trace) frames.add(e.item.stack_id, e.item.python_stack_id);
    frames.resolve();
    report::PickleWriter p;
    p.begin_dict();
    p.str("segments").begin_list();
    for (const Item& seg : st.segments) allocator_segment(p, frames, seg, st.tensors);
    for (const Item& seg : st.whole) segment(p, frames, seg);
    p.end_list();
    // The viewer indexes device_traces by device: the devices without entries below the highest one
    // get empty traces, and device 0 has one even when nothing was exported (it reads device 0's).
    p.str("device_traces").begin_list();
    const int devices = st.traces.empty() ? 1 : st.traces.rbegin()->first + 1;
    for (int device = 0; device < devices; ++device) {
        p.begin_list();
        auto trace = st.traces.find(device);
        if (trace != st.traces.end()) {
            for (const TraceEntry& e : trace->second) trace_entry(p, frames, r, e.item, e.action, e.t);
        }
        p.end_list();
    }
    p.end_list();
    p.end_dict();
    return p.finish();
}

}  // namespace

std::string memory_viz_pickle(const report::Report& r, size_t max_frames, std::vector<std::string>* notes) {
    return replayed_pickle(r, max_frames, notes);
}

}  // namespace memguard::cli

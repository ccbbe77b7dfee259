// memguard cycles --explain FILE [--json]: what the garbage of each explained collection held
// (format minor 9, docs/cycles.md): the CUDA storages largest first with their allocation sites,
// a chain of references from an object of the garbage to each of the largest, and the garbage's
// objects by group (frames by function and line first).
#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <unordered_set>

#include "cli.h"
#include "output.h"
#include "report/collections.h"
#include "report/json.h"
#include "report/saturate.h"
#include "report/stream.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::GarbageKind;
using report::human_bytes;

constexpr size_t kNamesPerGroup = 4;   // text: a kind's first groups (most bytes held, then most objects); JSON: all
constexpr size_t kStoragesShown = 10;  // text: the largest storages (a step's garbage may hold thousands)

/// The groups in the order a reader looks for what held the memory: frames (whose locals are what
/// a user can change) first, then autograd contexts and nodes, dynamo's objects, closures,
/// exceptions and tracebacks (which pin frames), tensors, and the plain type counts last.
constexpr std::array<GarbageKind, 9> kGroupOrder = {
    GarbageKind::Frame,     GarbageKind::AutogradFunction, GarbageKind::AutogradNode,
    GarbageKind::Dynamo,    GarbageKind::Closure,          GarbageKind::Exception,
    GarbageKind::Traceback, GarbageKind::Tensor,           GarbageKind::Type,
};

/// A group kind as the text names it, singular and plural.
std::pair<const char*, const char*> kind_words(GarbageKind k) {
    switch (k) {
    case GarbageKind::Frame: return {"frame", "frames"};
    case GarbageKind::AutogradFunction: return {"autograd context", "autograd contexts"};
    case GarbageKind::AutogradNode: return {"autograd node", "autograd nodes"};
    case GarbageKind::Dynamo: return {"dynamo object", "dynamo objects"};
    case GarbageKind::Closure: return {"closure", "closures"};
    case GarbageKind::Exception: return {"exception", "exceptions"};
    case GarbageKind::Traceback: return {"traceback", "tracebacks"};
    case GarbageKind::Tensor: return {"tensor", "tensors"};
    case GarbageKind::Type: break;
    }
    return {"object", "objects"};
}

/// 2113 -> "2,113".
std::string grouped(uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

/// "saved by CheckpointFunctionBackward" or "tensor".
std::string how_text(const report::GarbageTensor& g) {
    if (g.how == report::HeldHow::Saved) return "saved by " + (g.holder.empty() ? std::string("a context") : g.holder);
    return g.holder.empty() ? std::string("tensor") : "tensor (" + g.holder + ")";
}

/// One explanation with what is shown of it.
struct View {
    const report::Explanation* e = nullptr;
    std::vector<size_t> sites;                                        // per storage: handle into the symbolizer
    std::vector<std::pair<GarbageKind, std::vector<size_t>>> groups;  // kGroupOrder, indexes into e->groups
    std::vector<uint64_t> orphan_chains;  // chains to an address no y lists (a writer's slip; shown apart)
};

std::vector<View> make_views(const report::Report& r, SiteSymbolizer& sym) {
    std::vector<View> out;
    for (const report::Explanation& e : r.explanations) {
        View v;
        v.e = &e;
        for (const report::GarbageTensor& g : e.storages) v.sites.push_back(sym.add(g.stack_id, g.python_stack_id));
        for (GarbageKind k : kGroupOrder) {
            std::vector<size_t> members;
            for (size_t i = 0; i < e.groups.size(); ++i) {
                if (e.groups[i].kind == k) members.push_back(i);
            }
            std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {  // what held the most first
                const report::GarbageGroup &x = e.groups[a], &y = e.groups[b];
                return x.cuda_bytes != y.cuda_bytes ? x.cuda_bytes > y.cuda_bytes : x.count > y.count;
            });
            if (!members.empty()) v.groups.emplace_back(k, std::move(members));
        }
        std::unordered_set<uint64_t> listed;  // a set: a report's records may be many (time linear in them)
        for (const report::GarbageTensor& g : e.storages) listed.insert(g.addr);
        for (const auto& [addr, chain] : e.chains) {
            if (listed.count(addr) == 0 && !chain.empty()) v.orphan_chains.push_back(addr);
        }
        out.push_back(std::move(v));
    }
    sym.resolve();
    return out;
}

/// The site of a storage: its user's line (the view every command uses), "(segment)" when it is the
/// segment's (interposition mode: PyTorch's cache hides the tensor's own allocation).
std::string site_text(const report::Report& r, const report::GarbageTensor& g, const SiteFrames& s) {
    if (g.stack_id == 0 && g.python_stack_id == 0 && !g.site_is_segment) return "(no live allocation at its address)";
    return site_label(s, r) + (g.site_is_segment ? " (segment)" : "");
}

/// "compile_step /opt/app/train.py:44" (the u name of a frame or closure) as the views write
/// places: "compile_step at /opt/app/train.py:44".
std::string group_name(const report::GarbageGroup& g) {
    if (g.kind != GarbageKind::Frame && g.kind != GarbageKind::Closure) return g.name;
    size_t sp = g.name.rfind(' ');
    if (sp == std::string::npos || sp == 0) return g.name;
    return g.name.substr(0, sp) + " at " + g.name.substr(sp + 1);
}

std::string collection_head(const report::Report& r, const report::Explanation& e) {
    if (!e.collection) {
        return "Explanation " + std::to_string(e.id) + " at " + report::seconds_fixed3(e.t) + " s, thread " +
               std::to_string(e.tid) + ": no Y record names it (the report ended first, or the record was lost)";
    }
    const report::Collection& c = r.collections[*e.collection];
    std::string s = "Collection at " + report::seconds_fixed3(c.t) + " s, thread " + std::to_string(c.tid) + ": " +
                    report::trigger_label(c.trigger) + " gen " + std::to_string(c.generation);
    if (!c.compile_ids.empty()) {
        std::string ids;
        for (const std::string& id : c.compile_ids) ids += (ids.empty() ? "" : ",") + id;
        s += " (compiles " + ids + ")";
    }
    return s + ", explanation " + std::to_string(e.id);
}

void print_chain(const std::vector<report::ChainLink>& chain) {
    for (const report::ChainLink& l : chain) {
        if (l.edge.empty()) {
            print("      %s\n", l.object.c_str());
        } else {
            print("      %s  --%s-->\n", l.object.c_str(), l.edge.c_str());
        }
    }
    // The reader drops steps out of order (a warning says so): the chain then stops at an edge.
    if (!chain.empty() && !chain.back().edge.empty()) print("      ... (the rest of the chain is missing)\n");
}

void print_explanation(const report::Report& r, const View& v, const SiteSymbolizer& sym) {
    const report::Explanation& e = *v.e;
    print("\n%s\n", collection_head(r, e).c_str());
    if (e.collection) {
        const report::Collection& c = r.collections[*e.collection];
        print("  time         %s ms, the analysis %s ms of it\n", report::milliseconds_fixed3(c.duration_ns).c_str(),
              report::milliseconds_fixed3(e.analysis_ns).c_str());
    } else {
        print("  time         analysis %s ms\n", report::milliseconds_fixed3(e.analysis_ns).c_str());
    }
    std::string freed;
    if (e.collection) {
        const auto& f = r.collections[*e.collection].cuda_bytes_freed;
        freed = f ? "; the collection freed " + report::human_bytes_signed(*f) : "; CUDA bytes freed not known";
    }
    std::string listed = e.storages.size() < e.tensors ? " (" + std::to_string(e.storages.size()) + " listed)" : "";
    print("  garbage      %s %s held %s in %s%s%s\n", grouped(e.objects).c_str(), e.objects == 1 ? "object" : "objects",
          human_bytes(e.cuda_bytes).c_str(), plural(e.tensors, "CUDA storage", "CUDA storages").c_str(), listed.c_str(),
          freed.c_str());
    if (!e.complete) print("  partial      a limit (time or size) stopped the look: the lists below are partial\n");

    if (!e.storages.empty()) {
        print("  storages     largest first: size, how held, category, allocated at, held by\n");
        size_t how_w = 0, cat_w = 0;
        for (size_t i = 0; i < e.storages.size() && i < kStoragesShown; ++i) {
            const report::GarbageTensor& g = e.storages[i];
            how_w = std::max(how_w, how_text(g).size());
            cat_w = std::max(cat_w, format::name_of(g.category).size());
        }
        const size_t shown = std::min(e.storages.size(), kStoragesShown);
        for (size_t i = 0; i < shown; ++i) {
            const report::GarbageTensor& g = e.storages[i];
            auto chain = e.chains.find(g.addr);
            std::string held = chain != e.chains.end() && !chain->second.empty()
                                   ? "  held by " + chain->second.front().object
                                   : std::string();
            print("    %11s  %-*s  %-*s  %s%s\n", human_bytes(g.size).c_str(), static_cast<int>(how_w),
                  how_text(g).c_str(), static_cast<int>(cat_w), std::string(format::name_of(g.category)).c_str(),
                  site_text(r, g, sym.get(v.sites[i])).c_str(), held.c_str());
        }
        if (e.storages.size() > shown) {
            uint64_t rest = 0;
            for (size_t i = shown; i < e.storages.size(); ++i) rest = report::saturating_add(rest, e.storages[i].size);
            print("    %11s  in %zu more (--json lists every one)\n", human_bytes(rest).c_str(),
                  e.storages.size() - shown);
        }
    }

    // The chains of the storages shown, then those to addresses no y lists (at most as many).
    std::vector<std::pair<std::string, const std::vector<report::ChainLink>*>> chains;
    for (size_t i = 0; i < e.storages.size() && i < kStoragesShown; ++i) {
        const report::GarbageTensor& g = e.storages[i];
        auto chain = e.chains.find(g.addr);
        if (chain == e.chains.end() || chain->second.empty()) continue;
        chains.emplace_back("to the " + human_bytes(g.size) + " storage at " + hex(g.addr) + " on device " +
                                std::to_string(g.device),
                            &chain->second);
    }
    for (size_t i = 0; i < v.orphan_chains.size() && i < kStoragesShown; ++i) {
        chains.emplace_back("to " + hex(v.orphan_chains[i]) + " (no storage listed at that address)",
                            &e.chains.at(v.orphan_chains[i]));
    }
    if (!chains.empty()) print("  chains       holder first, one reference a line\n");
    for (const auto& [head, chain] : chains) {
        print("    %s:\n", head.c_str());
        print_chain(*chain);
    }

    const char* label = "  objects      ";
    for (const auto& [kind, members] : v.groups) {
        uint64_t total = 0;
        for (size_t i : members) total = report::saturating_add(total, e.groups[i].count);
        std::string names;
        for (size_t k = 0; k < members.size() && k < kNamesPerGroup; ++k) {
            const report::GarbageGroup& g = e.groups[members[k]];
            names += (k == 0 ? "" : ", ") + group_name(g) + " x" + grouped(g.count);
            if (g.cuda_bytes != 0) names += " (held " + human_bytes(g.cuda_bytes) + ")";
        }
        if (members.size() > kNamesPerGroup) names += ", " + std::to_string(members.size() - kNamesPerGroup) + " more";
        if (kind == GarbageKind::Type) {
            print("%smost frequent types: %s\n", label, names.c_str());
        } else {
            auto words = kind_words(kind);
            print("%s%s %s: %s\n", label, grouped(total).c_str(), total == 1 ? words.first : words.second,
                  names.c_str());
        }
        label = "               ";
    }
}

/// What to do to get explanations, for a report without any.
void print_none(const report::Report& r) {
    print("no explained collections%s\n", format_note(r, 9).c_str());
    print("memguard explains its own collections (after a compile, a recomputed backward, a step) whose garbage "
          "held at least\nMEMGUARD_EXPLAIN_MIN_BYTES (1M) of CUDA memory, with MEMGUARD_EXPLAIN_CYCLES=1 (the "
          "default);\nMEMGUARD_EXPLAIN_CYCLES=all explains the program's gc.collect() calls too.\n");
}

void json_chain(report::JsonWriter& j, const std::vector<report::ChainLink>& chain) {
    j.begin_array();
    for (const report::ChainLink& l : chain) {
        j.begin_object();
        j.key("object").value(l.object);
        j.key("edge");
        if (l.edge.empty()) {
            j.null();
        } else {
            j.value(l.edge);
        }
        j.end_object();
    }
    j.end_array();
}

void json_collection(report::JsonWriter& j, const report::Report& r, const report::Explanation& e) {
    j.key("collection");
    if (!e.collection) {
        j.null();
        return;
    }
    const report::Collection& c = r.collections[*e.collection];
    j.begin_object();
    j.key("index").value(static_cast<uint64_t>(*e.collection));
    j.key("time_s").number(report::seconds_exact(c.t));
    j.key("trigger").value(report::trigger_name(c.trigger));
    j.key("generation").value(c.generation);
    j.key("duration_s").number(report::seconds_exact(c.duration_ns));
    j.key("collected").value(c.collected);
    j.key("cuda_bytes_freed").value_or_null(c.cuda_bytes_freed);
    j.key("compile_ids").begin_array();
    for (const std::string& id : c.compile_ids) j.value(id);
    j.end_array();
    j.key("skipped").value_or_null(c.skipped);
    j.end_object();
}

void json_explanation(report::JsonWriter& j, const report::Report& r, const View& v, const SiteSymbolizer& sym) {
    const report::Explanation& e = *v.e;
    j.begin_object();
    j.key("id").value(e.id);
    j.key("time_s").number(report::seconds_exact(e.t));
    j.key("tid").value(e.tid);
    json_collection(j, r, e);
    j.key("objects").value(e.objects);
    j.key("tensors").value(e.tensors);
    j.key("cuda_bytes").value(e.cuda_bytes);
    j.key("analysis_s").number(report::seconds_exact(e.analysis_ns));
    j.key("complete").value(e.complete);
    j.key("storages").begin_array();
    for (size_t i = 0; i < e.storages.size(); ++i) {
        const report::GarbageTensor& g = e.storages[i];
        j.begin_object();
        j.key("device").value(g.device);
        j.key("addr").value(hex(g.addr));
        j.key("size").value(g.size);
        j.key("how").value(format::name_of(g.how));
        j.key("holder");
        if (g.holder.empty()) {
            j.null();
        } else {
            j.value(g.holder);
        }
        j.key("category").value(format::name_of(g.category));
        j.key("site");
        if (g.stack_id == 0 && g.python_stack_id == 0 && !g.site_is_segment) {
            j.null();
        } else {
            j.begin_object();
            j.key("segment").value(g.site_is_segment);
            j.key("label").value(site_label(sym.get(v.sites[i]), r));
            j.key("stack_id").value(g.stack_id);
            j.key("python_stack_id").value(g.python_stack_id);
            json_site_frames(j, sym.get(v.sites[i]), r);
            j.end_object();
        }
        j.key("chain");
        auto chain = e.chains.find(g.addr);
        if (chain == e.chains.end() || chain->second.empty()) {
            j.null();
        } else {
            json_chain(j, chain->second);
        }
        j.end_object();
    }
    j.end_array();
    j.key("unlisted_chains").begin_array();
    for (uint64_t addr : v.orphan_chains) {
        j.begin_object();
        j.key("addr").value(hex(addr));
        j.key("chain");
        json_chain(j, e.chains.at(addr));
        j.end_object();
    }
    j.end_array();
    j.key("groups").begin_array();
    for (const auto& [kind, members] : v.groups) {
        for (size_t i : members) {
            const report::GarbageGroup& g = e.groups[i];
            j.begin_object();
            j.key("kind").value(format::name_of(g.kind));
            j.key("count").value(g.count);
            j.key("cuda_bytes").value(g.cuda_bytes);
            j.key("name").value(g.name);
            j.end_object();
        }
    }
    j.end_array();
    j.end_object();
}

/// Reads nothing of the events: the explanations are records of their own, their sites named as
/// they are read (report/read_cycles.cpp).
class NoEvents : public report::EventObserver {
public:
    bool on_event(const report::Report&, const report::Event&) override { return true; }
};

/// The report through the streaming reader (report/stream.h); load_report where site labels need
/// backward_sites, and for a pipe that could not be spooled.
report::Report read_for_explanations(const std::string& path) {
    ReportInput in(path);
    NoEvents none;
    std::optional<report::Report> r = in.stream(none);
    if (r && !r->backward_pending) return std::move(*r);
    return in.load();
}

}  // namespace

int run_cycles_explain(const Args& args) {
    const report::Report r = read_for_explanations(args.file);
    print_warnings(r.warnings);
    SiteSymbolizer sym(r, args.frames);
    std::vector<View> views = make_views(r, sym);
    std::cout.flush();
    if (args.json) {
        report::JsonWriter j;
        j.begin_object();
        j.key("file").value(r.path);
        j.key("explanations").begin_array();
        for (const View& v : views) json_explanation(j, r, v, sym);
        j.end_array();
        j.end_object();
        std::cout << j.str();
        return kExitOk;
    }
    if (views.empty()) {
        print_none(r);
        return kExitOk;
    }
    print("Explained collections: %zu\n", views.size());
    for (const View& v : views) print_explanation(r, v, sym);
    return kExitOk;
}

}  // namespace memguard::cli

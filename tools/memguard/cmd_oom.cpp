// memguard oom FILE [--frames K] [--json]: each out-of-memory of a report explained (docs/oom.md): the
// request, the device, PyTorch's allocator and its fragmentation, the categories with their top
// sites, the phase and step, recent collections, and a verdict. Failed CUDA allocations that
// PyTorch recovered from are listed apart.
#include <algorithm>
#include <iostream>
#include <map>

#include "cli.h"
#include "output.h"
#include "report/categories.h"
#include "report/json.h"
#include "report/oom.h"
#include "report/stream.h"
#include "report/stream_oom.h"
#include "report/units.h"
#include "report_input.h"
#include "sites.h"

namespace memguard::cli {

namespace {

using report::human_bytes;

constexpr size_t kCategorySites = 3;
constexpr size_t kSavedLabels = 5;
constexpr size_t kListedCollections = 5;

/// One OOM (or recovered failure) with what is shown of it.
struct OomView {
    report::OomEvent event;
    report::OomFigures figures;
    report::Breakdown breakdown;
    size_t request_site = 0;                      // handle into the symbolizer
    std::vector<std::vector<size_t>> part_sites;  // per breakdown part, handles of its sites
    std::vector<std::string> verdict;
};

std::string source_text(const report::Report& r, const report::OomEvent& e) {
    switch (e.source) {
    case report::OomSource::Torch: return "PyTorch's allocator raised OutOfMemoryError (torch)";
    case report::OomSource::Allocator: return "memguard's allocator could not allocate (allocator)";
    case report::OomSource::Cuda: break;
    }
    std::string api = e.failure ? r.failures[*e.failure].api : "";
    return "a CUDA allocation call" + (api.empty() ? std::string() : " (" + api + ")") + " ran out of memory (cuda)";
}

std::string opt_bytes(const std::optional<uint64_t>& v) { return v ? human_bytes(*v) : "-"; }

std::string collection_text(const report::Collection& c) {
    std::string s = std::string(report::trigger_name(c.trigger)) + " gen " + std::to_string(c.generation) + " at " +
                    report::seconds_fixed3(c.t) + " s";
    if (c.cuda_bytes_freed) s += " freed " + report::human_bytes_signed(*c.cuda_bytes_freed);
    return s;
}

/// The rest of the collections line. A few are listed one by one; a busy Python program runs
/// hundreds of automatic gen-0 collections in 10 s, so beyond kListedCollections they are counted
/// by kind and only those that freed CUDA memory are named (the largest first), then the last one.
void print_collections(const report::Report& r, const std::vector<size_t>& recent) {
    if (recent.size() <= kListedCollections) {
        for (size_t i : recent) print("; %s", collection_text(r.collections[i]).c_str());
        return;
    }
    std::map<std::pair<std::string, int>, size_t> kinds;
    std::vector<size_t> freed;
    for (size_t i : recent) {
        const report::Collection& c = r.collections[i];
        ++kinds[{report::trigger_name(c.trigger), c.generation}];
        if (c.cuda_bytes_freed && *c.cuda_bytes_freed > 0) freed.push_back(i);
    }
    const char* sep = ": ";
    for (const auto& [kind, n] : kinds) {
        print("%s%zu %s gen %d", sep, n, kind.first.c_str(), kind.second);
        sep = ", ";
    }
    std::stable_sort(freed.begin(), freed.end(), [&](size_t a, size_t b) {
        return *r.collections[a].cuda_bytes_freed > *r.collections[b].cuda_bytes_freed;
    });
    if (freed.empty()) print("; none freed CUDA memory");
    for (size_t k = 0; k < freed.size() && k < kListedCollections; ++k) {
        print("; %s", collection_text(r.collections[freed[k]]).c_str());
    }
    if (freed.size() > kListedCollections) print("; %zu more freed CUDA memory", freed.size() - kListedCollections);
    print("; the last: %s", collection_text(r.collections[recent.back()]).c_str());
}

std::string phases_text(const report::Report& r, const report::OomFigures& f) {
    std::string s;
    for (size_t i : f.open_phases) s += (s.empty() ? "" : " > ") + r.phases[i].name;
    return s.empty() ? "-" : s;
}

void print_oom(const report::Report& r, const OomView& v, size_t number, const SiteSymbolizer& sym) {
    const report::OomEvent& e = v.event;
    const report::OomFigures& f = v.figures;
    print("\nOOM %zu at %s s on device %d, thread %llu: %s\n", number, report::seconds_fixed3(e.t).c_str(), e.device,
          static_cast<unsigned long long>(e.tid), source_text(r, e).c_str());
    std::string request = human_bytes(f.request);
    if (e.requested && *e.requested != e.rounded) request += " (rounded " + human_bytes(e.rounded) + ")";
    if (e.stream) request += ", stream " + hex(*e.stream);
    print("  request      %s\n", request.c_str());
    print("  at           %s  %s\n", site_label(sym.get(v.request_site), r).c_str(),
          site_ids_text(e.stack_id, e.python_stack_id).c_str());
    print("  phase        %s\n", phases_text(r, f).c_str());
    print("  step         %s\n", f.step ? (std::to_string(*f.step) + " (in progress)").c_str() : "-");
    print("  device       total %s, free %s, this process %s, others (incl. CUDA contexts) %s, limit %s\n",
          opt_bytes(f.device_total).c_str(), opt_bytes(f.device_free).c_str(), human_bytes(f.this_process).c_str(),
          opt_bytes(f.others).c_str(), opt_bytes(f.limit).c_str());
    std::string largest = opt_bytes(f.largest_free);
    if (f.largest_free) largest += " (" + f.largest_free_from + ")";
    print("  allocator    allocated %s, reserved %s, cached free %s, largest free block %s, fragmentation %s\n",
          opt_bytes(f.allocated).c_str(), opt_bytes(f.reserved).c_str(), opt_bytes(f.cached_free).c_str(),
          largest.c_str(), opt_bytes(f.fragmentation).c_str());
    for (size_t i : e.cuda_failures) {
        const report::FailedAlloc& c = r.failures[i];
        print("  before it    %s of %s failed at %s s\n", c.api.c_str(), human_bytes(c.size).c_str(),
              report::seconds_fixed3(c.t).c_str());
    }
    const report::Breakdown& b = v.breakdown;
    print("  categories   %s on the device%s\n", human_bytes(b.total).c_str(),
          b.moment ? (", tensors as of moment " + std::to_string(b.moment->id)).c_str()
                   : ", no moment: tensors not told apart");
    for (size_t p = 0; p < b.parts.size(); ++p) {
        const report::CategoryPart& part = b.parts[p];
        print("    %11s %6s  %s\n", human_bytes(part.bytes).c_str(), report::percent(part.bytes, b.total).c_str(),
              report::part_label(part).c_str());
        for (size_t s = 0; s < part.sites.size(); ++s) {
            print("      %11s  %s\n", human_bytes(part.sites[s].bytes).c_str(),
                  site_label(sym.get(v.part_sites[p][s]), r).c_str());
        }
    }
    if (!f.saved.empty()) print("  saved for backward by autograd graphs (as the library named them):\n");
    for (size_t i = 0; i < f.saved.size() && i < kSavedLabels; ++i) {
        print("    %11s  %s\n", human_bytes(f.saved[i].second).c_str(),
              f.saved[i].first.empty() ? "(no label)" : f.saved[i].first.c_str());
    }
    print("  collections  %zu in the %lld s before", f.collections.size(),
          static_cast<long long>(report::kRecentCollectionsNs / 1000000000));
    print_collections(r, f.collections);
    print("\n  pending      compile-garbage collection %s; stream capture in progress %s\n",
          f.compile_pending ? "yes" : "no", f.capturing ? "yes" : "no");
    for (size_t i = 0; i < v.verdict.size(); ++i)
        print("  %s %s\n", i == 0 ? "Verdict:" : "        ", v.verdict[i].c_str());
}

void print_recovered(const report::Report& r, const OomView& v, const SiteSymbolizer& sym) {
    const report::OomEvent& e = v.event;
    print("\nRecovered at %s s on device %d, thread %llu: %s of %s at %s; an allocation of at least that size "
          "succeeded on the thread within 1 s (PyTorch freed its cache and retried): not an out-of-memory\n",
          report::seconds_fixed3(e.t).c_str(), e.device, static_cast<unsigned long long>(e.tid),
          e.failure ? r.failures[*e.failure].api.c_str() : "a CUDA allocation", human_bytes(e.rounded).c_str(),
          site_label(sym.get(v.request_site), r).c_str());
}

void json_opt(report::JsonWriter& j, const char* key, const std::optional<uint64_t>& v) { j.key(key).value_or_null(v); }

void json_oom(report::JsonWriter& j, const report::Report& r, const OomView& v, const SiteSymbolizer& sym) {
    const report::OomEvent& e = v.event;
    const report::OomFigures& f = v.figures;
    j.begin_object();
    j.key("t").number(report::seconds_exact(e.t));
    j.key("thread").value(e.tid);
    j.key("device").value(e.device);
    j.key("source").value(format::name_of(e.source));
    j.key("recovered").value(e.recovered);
    json_opt(j, "requested", e.requested);
    j.key("rounded").value(e.rounded);
    json_opt(j, "stream", e.stream);
    j.key("site").value(site_label(sym.get(v.request_site), r));
    j.key("stack_id").value(e.stack_id);
    j.key("python_stack_id").value(e.python_stack_id);
    if (e.recovered) {
        j.end_object();
        return;
    }
    j.key("phases").begin_array();
    for (size_t i : f.open_phases) j.value(r.phases[i].name);
    j.end_array();
    j.key("step").value_or_null(f.step);
    json_opt(j, "device_total", f.device_total);
    json_opt(j, "device_free", f.device_free);
    json_opt(j, "limit", f.limit);
    j.key("this_process").value(f.this_process);
    json_opt(j, "others", f.others);
    json_opt(j, "allocated", f.allocated);
    json_opt(j, "reserved", f.reserved);
    json_opt(j, "cached_free", f.cached_free);
    json_opt(j, "largest_free_block", f.largest_free);
    j.key("largest_free_block_from");
    if (f.largest_free) {
        j.value(f.largest_free_from);
    } else {
        j.null();
    }
    json_opt(j, "fragmentation", f.fragmentation);
    j.key("cuda_failures_before").begin_array();
    for (size_t i : e.cuda_failures) {
        j.begin_object();
        j.key("api").value(r.failures[i].api);
        j.key("size").value(r.failures[i].size);
        j.key("t").number(report::seconds_exact(r.failures[i].t));
        j.end_object();
    }
    j.end_array();
    const report::Breakdown& b = v.breakdown;
    j.key("total").value(b.total);
    j.key("moment").value_or_null(b.moment ? std::optional<uint32_t>(b.moment->id) : std::nullopt);
    j.key("categories").begin_array();
    for (size_t p = 0; p < b.parts.size(); ++p) {
        const report::CategoryPart& part = b.parts[p];
        j.begin_object();
        j.key("category").value(format::name_of(part.category));
        j.key("detail").value(part.detail);
        j.key("bytes").value(part.bytes);
        j.key("estimate").value(part.estimate);
        j.key("sites").begin_array();
        for (size_t s = 0; s < part.sites.size(); ++s) {
            j.begin_object();
            j.key("label").value(site_label(sym.get(v.part_sites[p][s]), r));
            j.key("bytes").value(part.sites[s].bytes);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_array();
    j.key("saved_for_backward").begin_array();
    for (size_t i = 0; i < f.saved.size() && i < kSavedLabels; ++i) {
        j.begin_object();
        j.key("label").value(f.saved[i].first);
        j.key("bytes").value(f.saved[i].second);
        j.end_object();
    }
    j.end_array();
    j.key("collections").begin_array();
    for (size_t i : f.collections) {
        const report::Collection& c = r.collections[i];
        j.begin_object();
        j.key("t").number(report::seconds_exact(c.t));
        j.key("trigger").value(report::trigger_name(c.trigger));
        j.key("generation").value(c.generation);
        j.key("cuda_bytes_freed").value_or_null(c.cuda_bytes_freed);
        j.end_object();
    }
    j.end_array();
    j.key("compile_pending").value(f.compile_pending);
    j.key("capturing").value(f.capturing);
    j.key("verdict").begin_array();
    for (const std::string& s : v.verdict) j.value(s);
    j.end_array();
    j.end_object();
}

/// Where the figures and categories of an OOM come from: the whole report, or what the streaming
/// reader kept (report/stream_oom.h) with the tensor tags of its pass.
struct Source {
    const report::Report& r;
    const report::OomObserver* streamed = nullptr;
    const std::unordered_map<size_t, report::Category>* tags = nullptr;

    report::OomFigures figures(const report::OomEvent& e) const {
        return streamed ? streamed->figures(r, e) : report::oom_figures(r, e);
    }
    report::Breakdown breakdown(const report::OomEvent& e, const report::BreakdownOptions& options) const {
        if (!streamed) return report::breakdown_at(r, e.events_before, options);
        // The report of the point keeps the stacks, steps and moments of the whole one, at whose
        // positions PointBreakdowns reads them. Its breakdown points into it (Breakdown::moment): it
        // is read off the streamed report `r`, which lives on.
        report::LiveSet live;
        int64_t last_t = 0;
        const report::Report at = streamed->point_report(r, e, live, last_t);
        report::PointBreakdowns breakdowns(r, options, tags);
        return breakdowns.at(at, live, e.events_before, last_t);
    }
};

int show(const Args& args, const Source& from, std::vector<report::OomEvent> events) {
    const report::Report& r = from.r;
    print_warnings(r.warnings);
    SiteSymbolizer sym(r, args.frames);
    std::vector<OomView> views;
    for (report::OomEvent& e : events) {
        OomView v;
        v.event = std::move(e);
        v.request_site = sym.add(v.event.stack_id, v.event.python_stack_id);
        if (!v.event.recovered) {
            v.figures = from.figures(v.event);
            report::BreakdownOptions options;
            options.device = v.event.device;
            options.max_sites = kCategorySites;
            options.symbolizer = symbolizer_options();  // the same rules as `top --by category`
            v.breakdown = from.breakdown(v.event, options);
            for (const report::CategoryPart& part : v.breakdown.parts) {
                std::vector<size_t> handles;
                for (const report::Site& s : part.sites) handles.push_back(sym.add(s.stack_id, s.python_stack_id));
                v.part_sites.push_back(std::move(handles));
            }
        }
        views.push_back(std::move(v));
    }
    sym.resolve();
    size_t ooms = 0, recovered = 0;
    for (OomView& v : views) {
        if (v.event.recovered) {
            ++recovered;
            continue;
        }
        ++ooms;
        const report::Breakdown& b = v.breakdown;
        std::string top;
        if (!b.parts.empty() && !b.parts[0].sites.empty()) top = site_label(sym.get(v.part_sites[0][0]), r);
        v.verdict = report::oom_verdict(v.figures, b, top);
    }
    std::cout.flush();
    if (args.json) {
        report::JsonWriter j;
        j.begin_object();
        j.key("ooms").begin_array();
        for (const OomView& v : views) {
            if (!v.event.recovered) json_oom(j, r, v, sym);
        }
        j.end_array();
        j.key("recovered").begin_array();
        for (const OomView& v : views) {
            if (v.event.recovered) json_oom(j, r, v, sym);
        }
        j.end_array();
        j.end_object();
        std::cout << j.str();
        return kExitOk;
    }
    if (ooms == 0) {
        print("%s: no out-of-memory recorded%s", r.path.c_str(),
              recovered == 0 ? ""
                             : ("; " + plural(recovered, "failed CUDA allocation", "failed CUDA allocations") +
                                " recovered (PyTorch freed its cache and retried)")
                                   .c_str());
        print("\n");
    } else {
        print("Out-of-memory in %s: %s, %s\n", r.path.c_str(), plural(ooms, "out of memory", "out of memory").c_str(),
              plural(recovered, "recovered CUDA failure", "recovered CUDA failures").c_str());
    }
    size_t number = 0;
    for (const OomView& v : views) {
        if (v.event.recovered) {
            print_recovered(r, v, sym);
        } else {
            print_oom(r, v, ++number, sym);
        }
    }
    return kExitOk;
}

}  // namespace

int run_oom(const Args& args) {
    // The streaming reader (report/stream_oom.h): one pass, keeping the live set at each OOM and the
    // tensor tags (PointBreakdowns: the categories at a point of a report with steps or moments);
    // load_report where it cannot answer exactly: backward_pending (site labels), a point or a retry
    // window it did not keep (a report written out of time order), a pipe that could not be spooled.
    ReportInput in(args.file);
    report::OomObserver observer(true);
    report::TensorTagObserver tags;
    report::Observers both({&observer, &tags});
    if (std::optional<report::Report> r = in.stream(both); r && !r->backward_pending) {
        if (std::optional<std::vector<report::OomEvent>> events = observer.ooms(*r)) {
            const std::unordered_map<size_t, report::Category> tag_map = tags.take();
            return show(args, Source{*r, &observer, &tag_map}, std::move(*events));
        }
    }
    const report::Report r = in.load();
    return show(args, Source{r}, report::find_ooms(r));
}

}  // namespace memguard::cli

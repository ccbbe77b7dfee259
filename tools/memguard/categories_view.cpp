#include "categories_view.h"

#include <cstdio>

#include "cli.h"
#include "output.h"
#include "report/units.h"

namespace memguard::cli {

namespace {

std::string share(uint64_t part, uint64_t total) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", total == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(total));
    return buf;
}

}  // namespace

report::BreakdownOptions CategoryView::options(size_t max_sites) {
    report::BreakdownOptions o;
    o.max_sites = max_sites;
    o.symbolizer = symbolizer_options();
    return o;
}

CategoryView::CategoryView(const report::Report& r, size_t events_applied, size_t max_sites, size_t frames)
    : r_(r), b_(report::breakdown_at(r, events_applied, options(max_sites))), sym_(r, frames) {
    symbolize();
}

CategoryView::CategoryView(const report::Report& r, report::Breakdown b, size_t frames)
    : r_(r), b_(std::move(b)), sym_(r, frames) {
    symbolize();
}

void CategoryView::symbolize() {
    for (const report::CategoryPart& p : b_.parts) {
        handles_.emplace_back();
        for (const report::Site& s : p.sites) handles_.back().push_back(sym_.add(s.stack_id, s.python_stack_id));
    }
    sym_.resolve();
}

std::string CategoryView::moment_text() const {
    const report::Moment* m = b_.moment;
    if (m == nullptr) return "no moment named tensors";
    return "tensors named by " + std::string(format::name_of(m->reason)) + " moment " + std::to_string(m->id) +
           " (after " + plural(m->step, "step", "steps") + (m->complete ? "" : ", partial") + ")";
}

uint64_t CategoryView::estimated_bytes() const {
    uint64_t n = 0;
    for (const report::CategoryPart& p : b_.parts) n += p.estimated_bytes;
    return n;
}

void CategoryView::print_text(bool sites, bool frames_shown) const {
    for (size_t i = 0; i < b_.parts.size(); ++i) {
        const report::CategoryPart& p = b_.parts[i];
        std::string name = report::part_name(p);
        std::string mark = p.estimate ? (p.estimated_bytes == p.bytes ? "estimate" : "partly estimate") : "";
        if (!sites) {
            std::string top = p.sites.empty() ? "" : site_label(sym_.get(handles_[i][0]), r_);
            print("  %-46s %10s %7s  %-15s %s\n", name.c_str(), report::human_bytes(p.bytes).c_str(),
                  report::percent(p.bytes, b_.total).c_str(), mark.c_str(), top.c_str());
            continue;
        }
        print("\n%-48s %10s %7s  %s%s\n", name.c_str(), report::human_bytes(p.bytes).c_str(),
              report::percent(p.bytes, b_.total).c_str(), plural(p.blocks, "block", "blocks").c_str(),
              mark.empty() ? "" : (", " + mark).c_str());
        for (size_t k = 0; k < p.sites.size(); ++k) {
            const report::Site& s = p.sites[k];
            const SiteFrames& f = sym_.get(handles_[i][k]);
            print("    #%-2zu %10s %7s  %s  %s\n", k + 1, report::human_bytes(s.bytes).c_str(),
                  report::percent(s.bytes, p.bytes).c_str(), site_label(f, r_).c_str(),
                  site_ids_text(s.stack_id, s.python_stack_id).c_str());
            if (frames_shown) print_site_frames(f, r_);
        }
    }
}

void CategoryView::json(report::JsonWriter& j, bool frames) const {
    j.key("total_bytes").value(b_.total);
    j.key("estimated_bytes").value(estimated_bytes());
    j.key("moment");
    if (b_.moment == nullptr) {
        j.null();
    } else {
        j.begin_object();
        j.key("id").value(b_.moment->id);
        j.key("reason").value(format::name_of(b_.moment->reason));
        j.key("step").value(b_.moment->step);
        j.key("complete").value(b_.moment->complete);
        j.end_object();
    }
    j.key("categories").begin_array();
    for (size_t i = 0; i < b_.parts.size(); ++i) {
        const report::CategoryPart& p = b_.parts[i];
        j.begin_object();
        j.key("category").value(format::name_of(p.category));
        j.key("detail");
        if (p.detail.empty()) {
            j.null();
        } else {
            j.value(p.detail);
        }
        j.key("bytes").value(p.bytes);
        j.key("blocks").value(p.blocks);
        j.key("share").number(share(p.bytes, b_.total));
        j.key("estimate").value(p.estimate);
        j.key("estimated_bytes").value(p.estimated_bytes);
        j.key("sites").begin_array();
        for (size_t k = 0; k < p.sites.size(); ++k) {
            const report::Site& s = p.sites[k];
            const SiteFrames& f = sym_.get(handles_[i][k]);
            j.begin_object();
            j.key("stack_id").value(s.stack_id);
            j.key("python_stack_id").value(s.python_stack_id);
            j.key("kind").value(s.physical ? "physical" : "blocks");
            j.key("bytes").value(s.bytes);
            j.key("blocks").value(s.blocks);
            j.key("label").value(site_label(f, r_));
            if (frames) json_site_frames(j, f, r_);
            j.end_object();
        }
        j.end_array();
        j.end_object();
    }
    j.end_array();
}

}  // namespace memguard::cli

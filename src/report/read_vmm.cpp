// The reader's driver virtual memory records (docs/report-format.md, minors 3 and 11): V, v, N, n,
// Q, q, m.
// The writer's side is track/records_vmm.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::Reserve& r) {
    Reservation v;
    v.t_reserve = r.t;
    v.tid = r.tid;
    v.va = r.va;
    v.size = r.size;
    v.stack_id = r.stack_id;
    v.python_stack_id = r.python_stack_id;
    check_stack_ref(v.stack_id, "V");
    check_python_stack_ref(v.python_stack_id, "V");
    size_t index = report_.reservations.size();
    auto old = reserved_.find(v.va);
    if (old != reserved_.end()) {
        warn("double-reserve", "address range reserved at " + hex(v.va) +
                                   ", which is already reserved; the "
                                   "earlier range is taken as freed (a cuMemAddressFree was not recorded)");
        report_.reservations[old->second].t_free = v.t_reserve;
        add_event(Event::AddressFree, old->second, v.t_reserve);
    }
    reserved_[v.va] = index;
    report_.reservations.push_back(v);
    add_event(Event::Reserve, index, v.t_reserve);
}

void Parser::apply(const rec::AddressFree& r) {
    auto it = reserved_.find(r.va);
    if (it == reserved_.end()) {
        warn("address-free-not-reserved", "address free of " + hex(r.va) + ", which is not reserved; ignored");
        return;
    }
    report_.reservations[it->second].t_free = r.t;
    add_event(Event::AddressFree, it->second, r.t);
    reserved_.erase(it);
}

void Parser::apply(const rec::Create& r) {
    PhysicalHandle h;
    h.t_create = r.t;
    h.tid = r.tid;
    h.handle = r.handle;
    h.size = r.size;
    h.device = r.device;
    h.stack_id = r.stack_id;
    h.python_stack_id = r.python_stack_id;
    h.capture_id = r.capture_id;
    check_stack_ref(h.stack_id, "N");
    check_python_stack_ref(h.python_stack_id, "N");
    check_capture_ref(h.capture_id, "N");
    auto old = handles_.find(h.handle);
    if (old != handles_.end() && !report_.handles[old->second].t_release) {
        warn("double-create", "physical memory created with handle " + hex(h.handle) +
                                  ", which is not released; "
                                  "the earlier handle is taken as released (a cuMemRelease was not recorded)");
        PhysicalHandle& prev = report_.handles[old->second];
        prev.t_release = h.t_create;
        if (handle_maps_[old->second] == 0) prev.t_gone = h.t_create;
        add_event(Event::Release, old->second, h.t_create);
    }
    size_t index = report_.handles.size();
    handles_[h.handle] = index;
    handle_maps_.push_back(0);
    report_.handles.push_back(h);
    add_event(Event::Create, index, h.t_create);
}

void Parser::apply(const rec::Release& r) {
    auto it = handles_.find(r.handle);
    if (it == handles_.end() || report_.handles[it->second].t_release) {
        if (auto im = imported_.find(r.handle); im != imported_.end()) {
            report_.imports[im->second].t_release = r.t;  // another process's memory: no figure moves
            imported_.erase(im);
            return;
        }
        warn("release-not-created",
             "release of handle " + hex(r.handle) + ", which no unreleased N or m record created; ignored");
        return;
    }
    PhysicalHandle& h = report_.handles[it->second];
    h.t_release = r.t;
    // The driver returns the memory at the release only when nothing maps it; else at the last unmap.
    if (handle_maps_[it->second] == 0) h.t_gone = r.t;
    add_event(Event::Release, it->second, r.t);
}

void Parser::remove_mapping(std::map<uint64_t, size_t>::iterator it, int64_t t) {
    size_t index = it->second;
    mapped_.erase(it);
    Mapping& m = report_.mappings[index];
    m.t_unmap = t;
    if (m.handle) {
        uint64_t& maps = handle_maps_[*m.handle];
        maps -= maps > 0 ? 1 : 0;
        PhysicalHandle& h = report_.handles[*m.handle];
        if (maps == 0 && h.t_release && !h.t_gone) h.t_gone = t;
    }
    add_event(Event::Unmap, index, t);
}

void Parser::apply(const rec::Map& r) {
    Mapping m;
    m.t_map = r.t;
    m.tid = r.tid;
    m.va = r.va;
    m.size = r.size;
    m.offset = r.offset;
    m.handle_value = r.handle;
    auto h = handles_.find(m.handle_value);
    if (h != handles_.end() && !report_.handles[h->second].t_gone) {
        m.handle = h->second;
        if (report_.handles[h->second].t_release) {
            warn("map-released", "mapping of handle " + hex(m.handle_value) + ", which was released");
        }
    } else if (auto im = imported_.find(m.handle_value); im != imported_.end()) {
        m.import = im->second;
        ++report_.imports[im->second].maps;
    } else {
        warn("map-unknown-handle", "mapping at " + hex(m.va) + " of handle " + hex(m.handle_value) +
                                       ", which no N or m record made; counted as mapped, not as physical memory");
    }
    auto old = mapped_.find(m.va);
    if (old != mapped_.end()) {
        warn("double-map", "mapping at " + hex(m.va) +
                               ", which is already mapped; the earlier mapping is taken as "
                               "unmapped (a cuMemUnmap was not recorded)");
        remove_mapping(old, m.t_map);
    }
    size_t index = report_.mappings.size();
    if (m.handle) {
        ++handle_maps_[*m.handle];
        ++report_.handles[*m.handle].maps;
    }
    mapped_[m.va] = index;
    report_.mappings.push_back(m);
    add_event(Event::Map, index, m.t_map);
}

void Parser::apply(const rec::Import& r) {
    ImportedHandle h;
    h.handle = r.handle;
    h.tid = r.tid;
    h.t_import = r.t;
    h.stack_id = r.stack_id;
    h.python_stack_id = r.python_stack_id;
    check_stack_ref(h.stack_id, "m");
    check_python_stack_ref(h.python_stack_id, "m");
    auto live = handles_.find(h.handle);
    if (live != handles_.end() && !report_.handles[live->second].t_release) {
        warn("import-of-created",
             "import of handle " + hex(h.handle) + ", which an unreleased N record created; ignored (the N keeps it)");
        return;
    }
    if (auto old = imported_.find(h.handle); old != imported_.end()) {
        warn("double-import", "import of handle " + hex(h.handle) +
                                  ", which is imported and not released; the earlier import is taken as released");
        report_.imports[old->second].t_release = h.t_import;
    }
    imported_[h.handle] = report_.imports.size();
    report_.imports.push_back(h);
}

void Parser::apply(const rec::Unmap& r) {
    // cuMemUnmap takes whole mappings: every mapping that starts in the range goes.
    uint64_t end = r.va + r.size < r.va ? UINT64_MAX : r.va + r.size;
    auto it = mapped_.lower_bound(r.va);
    if (it == mapped_.end() || it->first >= end) {
        warn("unmap-not-mapped", "unmap of " + hex(r.va) + ", which is not mapped; ignored");
        return;
    }
    while (it != mapped_.end() && it->first < end) remove_mapping(it++, r.t);
    ++report_.unmaps;
}

}  // namespace memguard::report

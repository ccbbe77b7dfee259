// A bounded report's spine and detail parts (docs/bounded-reports.md; docs/report-format.md,
// "Added in minor 10"): the parser reads both as one stream of records, in the order the run made
// them. At each spine `l` it reads the parts up to that position through DetailParts
// (report/detail_parts.h), decoding their records with the part's decoders; a block a part carries
// is skipped when the part before it was read, and taken as live after a gap.
#include <algorithm>
#include <cstdint>
#include <string>

#include "common/text.h"
#include "report/parser.h"
#include "report/units.h"

namespace memguard::report {

void Parser::start_detail() {
    detail_.emplace();
    detail_->parts.emplace(report_.path, magic_line_, binary_ ? own_binary_decoder_.version() : 0,
                           [this](std::string w) { warnings_.add("parts", std::move(w)); });
    report_.bounded = true;
}

void Parser::apply(const rec::DetailAt& r) {
    if (detail_ && detail_->reading) {
        warn("parts", "an l record inside a detail part (ignored)");
        return;
    }
    if (!detail_) start_detail();
    read_detail(r.position);
}

void Parser::apply(const rec::DetailDropped& r) {
    if (r.end < r.first) malformed("its end " + std::to_string(r.end) + " is before its first record");
    if (!detail_) start_detail();
    Detail& d = *detail_;
    d.dropped += r.end - r.first;
    d.dropped_until = std::max(d.dropped_until, r.until);
    ++d.dropped_parts;
}

void Parser::read_detail(uint64_t position) {
    DetailParts& parts = *detail_->parts;
    parts.read_to(position, [this, &parts](const DetailParts::Record& rec) {
        // The part's decoders and its place for messages, the report's again after the record.
        struct Reading {
            Parser& p;
            uint64_t offset;
            explicit Reading(Parser& p, DetailParts& parts) : p(p), offset(p.offset_) {
                p.detail_->reading = true;
                p.text_decoder_ = &parts.text_decoder();
                p.binary_decoder_ = &parts.binary_decoder();
            }
            ~Reading() {
                p.detail_->reading = false;
                p.text_decoder_ = &p.decoder_;
                p.binary_decoder_ = &p.own_binary_decoder_;
                p.offset_ = offset;
                p.skip_carried_ = 0;
                p.carrying_ = false;
            }
        } reading(*this, parts);
        skip_carried_ = rec.role == DetailParts::Role::Known ? 1 : 0;
        carrying_ = rec.role == DetailParts::Role::Carried;
        if (binary_) {
            frame(rec.letter, rec.payload, rec.offset);
        } else {
            split_fields(rec.line, f_);
            record();
        }
    });
}

void Parser::finish_detail() {
    read_detail(UINT64_MAX);
    Detail& d = *detail_;
    const DetailParts& parts = *d.parts;
    report_.detail_dropped = d.dropped;
    report_.detail_dropped_until = d.dropped_until;
    const auto limit = report_.info.find("report_limit");
    const std::string bound = limit == report_.info.end() ? ""
                                                          : " (MEMGUARD_MAX_REPORT_SIZE " + limit->second + " bytes)";
    if (d.dropped > 0) {
        warnings_.add_first(
            report_.path + ": detail dropped: a bounded report" + bound + " whose writer deleted " +
            std::to_string(d.dropped_parts) + " detail part(s) (" + std::to_string(d.dropped) +
            " allocations and frees, up to t=" + seconds_fixed3(d.dropped_until) +
            " s) to stay under its limit; what is shown counts the blocks live then and what came after");
    }
    if (parts.parts() == 0 && parts.position() > 0) {
        warnings_.add_first(report_.path + ": the detail parts of this bounded report are not beside it (" +
                            parts.part_path(1) + ", ...): its allocations and frees are missing");
    } else if (parts.gaps() > d.dropped) {
        warnings_.add_first(report_.path + ": " + std::to_string(parts.gaps() - d.dropped) +
                            " allocation and free records of its detail parts are missing (a part lost or cut short)");
    }
}

}  // namespace memguard::report

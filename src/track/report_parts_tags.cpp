// Repeated tags (docs/bounded-reports.md, "Repeated tags"). In allocator mode a g record names the
// T block live at its moment at that address, for the block's whole life, and the reader takes the
// least category of all its tags (report/categories.h, TensorTagObserver). A step moment tags every
// live tensor, so each step says again what the blocks that live across steps (parameters,
// gradients, optimizer state) were told: a bounded report's spine would grow by them at every step.
// The writer leaves out a step moment's g when the block it names was live at the moment's h (its T
// came before the h, and it is live still) and a moment whose h stands in the same detail part gave
// it a tag of its category or a lesser one: what the reader resolves is the same. Each part's first
// step moment tags every block again, so a reader that starts at a part (its first parts deleted,
// folded or not) finds the tags as the unbounded run gives them. The k record counts the tags
// written, so that the moment stays complete. Only where the writer sees the live blocks: a
// bounded report's parts.
#include <cstring>
#include <string_view>
#include <vector>

#include "format/binary_decode.h"
#include "format/decode.h"
#include "track/packed.h"
#include "track/report_parts.h"

namespace memguard::track {

namespace {

/// Decodes record R from `record` (a text line, its letter first, or a binary payload).
template <class R>
bool decode(bool binary, std::string_view record, R& r) {
    try {
        if (binary) {
            format::BinaryDecoder d;
            d.read(record, format::kFormatMinor, r);
        } else {
            std::vector<std::string_view> fields;
            for (size_t start = 0;;) {
                const size_t space = record.find(' ', start);
                fields.push_back(record.substr(start, space - start));
                if (space == std::string_view::npos) break;
                start = space + 1;
            }
            format::Decoder d;
            d.read(fields, format::kFormatMinor, r);
        }
        return true;
    } catch (...) {
        return false;  // not ours to judge: the record goes as it is
    }
}

}  // namespace

bool ReportParts::repeated_tag(char letter, std::string_view record, std::string& rewritten) {
    rewritten.clear();
    if (letter == format::rec::MomentBegin::kLetter) {
        format::rec::MomentBegin h;
        if (decode(binary_, record, h) && h.reason == format::MomentReason::Step) {
            step_moments_[h.moment] = OpenMoment{position_, part_first_, 0};
        }
        return false;
    }
    if (letter == format::rec::TensorTag::kLetter) {
        if (step_moments_.empty()) return false;
        format::rec::TensorTag g;
        if (!decode(binary_, record, g)) return false;
        const auto m = step_moments_.find(g.moment);
        if (m == step_moments_.end()) return false;
        const auto it = tensors_.find(g.addr);
        if (it == tensors_.end() || it->second.r.device != g.device || it->second.at >= m->second.at) return false;
        LiveTensor& x = it->second;
        const auto category = static_cast<uint8_t>(g.category);
        // A moment right where the part begins may be read before the part's carried set: not one
        // that told.
        const bool told_in_part = x.told != kUntold && x.told_at > m->second.part_first;
        if (told_in_part && x.told <= category) {
            ++m->second.left_out;
            return true;
        }
        if (!told_in_part || category < x.told) {
            x.told = category;
            x.told_at = m->second.at;
        }
        return false;
    }
    if (letter == format::rec::MomentEnd::kLetter) {
        format::rec::MomentEnd k;
        if (!decode(binary_, record, k)) return false;
        const auto m = step_moments_.find(k.moment);
        if (m == step_moments_.end()) return false;
        const uint64_t left_out = m->second.left_out;
        step_moments_.erase(m);
        if (left_out == 0 || k.tensors < left_out) return false;
        k.tensors -= left_out;
        encode_record(binary_, k, rewritten);
        return true;
    }
    return false;
}

bool ReportParts::leave_out_repeated_tags(std::string_view run, std::string& out) {
    const char* p = run.data();
    const char* const end = p + run.size();
    const char* kept = p;  // the start of the records not copied to `out` yet
    bool changed = false;
    std::string rewritten;
    while (p < end) {
        const char letter = *p;
        const char* next = end;
        std::string_view record;
        if (binary_) {
            // A frame: its letter, its payload's length (a varint), the payload.
            uint64_t length = 0;
            const char* q = format::get_varint(p + 1, end, &length);
            if (q == nullptr || length > static_cast<uint64_t>(end - q)) break;
            record = std::string_view(q, static_cast<size_t>(length));
            next = q + length;
        } else {
            const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
            if (nl == nullptr) break;
            next = static_cast<const char*>(nl) + 1;
            record = std::string_view(p, static_cast<size_t>(next - 1 - p));
        }
        const bool told = (letter == format::rec::MomentBegin::kLetter || letter == format::rec::TensorTag::kLetter ||
                           letter == format::rec::MomentEnd::kLetter) &&
                          repeated_tag(letter, record, rewritten);
        if (told) {
            if (!changed) out.clear();
            changed = true;
            out.append(kept, static_cast<size_t>(p - kept));
            out.append(rewritten);
            kept = next;
        }
        p = next;
    }
    if (changed) out.append(kept, static_cast<size_t>(end - kept));
    return changed;
}

}  // namespace memguard::track

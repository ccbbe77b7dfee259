// Records in the report's encoding: text lines (format/encode.h) or binary frames
// (format/binary.h). The recorder's records are encoded where they are made, except the
// predicted ones (A, F, T, t in binary), which are packed and encoded by the writer thread in file
// order (PackedOut), as the binary encoding's predictions need.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>

#include "format/binary.h"
#include "format/encode.h"
#include "track/event_sink.h"
#include "track/report_parts.h"

namespace memguard::track {

class Clock;

/// Where a packed record's formatter writes it (EventSink::PackedFormat): text, or binary against
/// the writer's predictions.
class PackedOut {
public:
    /// `predictions`: null for text. `parts`: a bounded report's (report_parts.h): the predicted
    /// records go to its detail part, encoded against `part_predictions`, the others to `out`,
    /// the spine.
    PackedOut(const Clock& clock, std::string& out, format::binary::Predictions* predictions,
              ReportParts* parts = nullptr, format::binary::Predictions* part_predictions = nullptr) noexcept
        : clock(clock), out_(out), predictions_(predictions), parts_(parts), part_predictions_(part_predictions) {}

    const Clock& clock;

    template <class R>
    void record(const R& r) {
        if (parts_ != nullptr) {
            if constexpr (format::is_predicted<R>()) {
                parts_->detail(r, *part_predictions_);
                if (parts_->chunk_full()) parts_->drain(*part_predictions_, out_, r.t);
                return;
            }
            if constexpr (std::is_same_v<R, format::rec::Restore>) parts_->restore(r.addr);
            parts_->before_spine(out_);
        }
        if (predictions_ == nullptr) {
            format::Line line;
            format::encode(r, line);
            out_.append(line.finish());
        } else if constexpr (format::is_predicted<R>()) {
            // Room first: once encoded, the record must reach the file, or the reader's predictions
            // would part from the writer's.
            out_.reserve(out_.size() + format::Frame::kCapacity);
            out_.append(format::encode_predicted(r, *predictions_, values_, frame_));
        } else {
            out_.append(format::encode_plain(r, frame_));
        }
    }
    /// Raw text, for a test's formatter.
    std::string& text() noexcept { return out_; }

private:
    std::string& out_;
    format::binary::Predictions* predictions_;
    ReportParts* parts_;
    format::binary::Predictions* part_predictions_;
    format::Frame values_, frame_;
};

/// Appends record `r`'s encoding (binary or text) to `out`.
template <class R>
void encode_record(bool binary, const R& r, std::string& out) {
    static_assert(!format::is_predicted<R>(), "predicted records are encoded in file order (PackedOut)");
    if (binary) {
        format::Frame frame;
        out.append(format::encode_plain(r, frame));
    } else {
        format::Line line;
        format::encode(r, line);
        out.append(line.finish());
    }
}

/// Appends record `r` to `sink` in its encoding (a plain record: any but A, F, T and t).
template <class R>
__attribute__((noinline)) void append_plain(EventSink& sink, const R& r) noexcept {
    static_assert(!format::is_predicted<R>(), "predicted records are packed (append_packed)");
    if (sink.binary()) {
        format::Frame frame;
        sink.append(format::encode_plain(r, frame));
    } else {
        format::Line line;
        format::encode(r, line);
        sink.append(line.finish());
    }
}

/// A record packed as its own bytes (a trivially copyable record of the table), encoded by the
/// writer thread.
template <class R>
void format_packed(const unsigned char* payload, uint32_t bytes, PackedOut& out) {
    static_assert(std::is_trivially_copyable_v<R> && sizeof(R) <= EventSink::kMaxPackedBytes);
    R r;
    std::memcpy(static_cast<void*>(&r), payload, bytes < sizeof r ? bytes : sizeof r);
    out.record(r);
}

}  // namespace memguard::track

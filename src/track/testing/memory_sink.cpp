#include "track/testing/memory_sink.h"

#include "format/encode.h"
#include "track/clock.h"
#include "track/packed.h"
#include "track/writer.h"

namespace memguard::track::testing {

bool MemorySink::start(const std::string& path, const std::string& name_in_directory, std::string_view header,
                       std::string* error) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_next_.empty()) {
        *error = fail_next_;
        fail_next_.clear();
        return false;
    }
    std::string where = path;
    if (!where.empty() && where.back() == '/') where += name_in_directory;
    reports_.push_back(Report{where, std::string(header)});
    started_ = true;
    finished_ = false;
    return true;
}

const std::string& MemorySink::path() const {
    std::lock_guard<std::mutex> lock(mu_);
    return started_ ? reports_.back().path : empty_;
}

void MemorySink::append(std::string_view records) noexcept {
    if (records.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    Entry e;
    e.text.assign(records.data(), records.size());
    if (e.text.back() != '\n') e.text += '\n';  // as the file's writer ends an unterminated record
    pending_.push_back(std::move(e));
}

void MemorySink::append_packed(PackedFormat format, const void* payload, uint32_t bytes) noexcept {
    if (bytes > kMaxPackedBytes) bytes = kMaxPackedBytes;
    std::lock_guard<std::mutex> lock(mu_);
    Entry e;
    e.format = format;
    e.payload.assign(static_cast<const char*>(payload), bytes);
    pending_.push_back(std::move(e));
}

void MemorySink::add_lost(uint64_t records) noexcept {
    if (records == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_ == 0) lost_since_ = clock_.now();
    lost_ += records;
}

void MemorySink::write_pending_locked(bool heartbeat) {
    if (pending_.empty() && lost_ == 0) return;
    if (heartbeat) {
        if (lost_ > 0) {
            format::Line u;
            format::encode(format::rec::Lost{clock_.now(), lost_since_, lost_}, u);
            pending_.push_back(Entry{std::string(u.finish()), nullptr, {}});
            lost_ = 0;
        }
        format::Line hb;
        format::encode(format::rec::Heartbeat{clock_.now()}, hb);
        pending_.push_back(Entry{std::string(hb.finish()), nullptr, {}});
    }
    // Like the file's writer: records appended before the report started, or after it ended,
    // are not written anywhere.
    if (started_ && !finished_) {
        clock_.anchor();
        std::string& out = reports_.back().text;
        for (const Entry& e : pending_) {
            if (e.format) {
                PackedOut packed(clock_, out, nullptr);  // a memory sink holds text
                e.format(reinterpret_cast<const unsigned char*>(e.payload.data()),
                         static_cast<uint32_t>(e.payload.size()), packed);
            } else {
                out += e.text;
            }
        }
    }
    pending_.clear();
}

void MemorySink::flush() {
    std::lock_guard<std::mutex> lock(mu_);
    write_pending_locked(true);
}

void MemorySink::finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_ > 0) {
        format::Line u;
        format::encode(format::rec::Lost{clock_.now(), lost_since_, lost_}, u);
        pending_.push_back(Entry{std::string(u.finish()), nullptr, {}});
        lost_ = 0;
    }
    format::Line z;
    format::encode(format::rec::End{clock_.now()}, z);
    pending_.push_back(Entry{std::string(z.finish()), nullptr, {}});
    write_pending_locked(false);
    finished_ = true;
}

void MemorySink::reset_in_child() {
    // The parent's report and its buffered records are the parent's.
    started_ = false;
    finished_ = false;
    pending_.clear();
    lost_ = 0;
    lost_since_ = 0;
}

void MemorySink::fail_next_start(std::string error) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = std::move(error);
}

size_t MemorySink::report_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_.size();
}

std::string MemorySink::text(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return i < reports_.size() ? reports_[i].text : std::string();
}

std::string MemorySink::text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_.empty() ? std::string() : reports_.back().text;
}

std::string MemorySink::path_of(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return i < reports_.size() ? reports_[i].path : std::string();
}

size_t MemorySink::pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
}

}  // namespace memguard::track::testing

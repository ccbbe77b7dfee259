#include "report/fold.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/text.h"
#include "format/decode.h"
#include "format/encode.h"
#include "report/categories.h"
#include "report/detail_parts.h"
#include "report/line_reader.h"
#include "report/parser.h"
#include "report/stream.h"
#include "report/stream_oom.h"
#include "report/stream_phases.h"
#include "report/stream_steps.h"
#include "report/user_frame.h"
#include "report/warnings.h"

namespace memguard::report {

namespace {

constexpr std::string_view kFoldSuffix = ".fold-";
/// Pairs of values per record (a record is at most format::Line::kCapacity bytes).
constexpr size_t kPairsPerRecord = 150;

template <class R>
void append(std::string& out, const R& r) {
    format::Line line;
    format::encode(r, line);
    out += line.finish();
}

void append_figure(std::string& out, std::string_view name, uint64_t copies, const int64_t* v, size_t n) {
    format::rec::Figure z;
    z.name = name;
    z.copies = copies;
    z.values = format::Tail<int64_t>{v, n};
    append(out, z);
}

}  // namespace

FoldWriter::FoldWriter(const FoldPoint& at) {
    text_ = at.magic + "\n";
    append(text_, format::rec::Info{"format_minor", std::to_string(format::kFormatMinor)});
    append(text_, format::rec::FoldAt{at.part, at.position, at.events, at.blocks, at.tensors, at.t, at.dropped,
                                      at.dropped_until, at.dropped_parts});
    std::vector<int64_t> v;
    for (auto [name, orders] : {std::pair{"reader.carried_blocks", at.carried_blocks},
                                std::pair{"reader.carried_tensors", at.carried_tensors}}) {
        if (orders == nullptr) continue;
        for (size_t i = 0; i < orders->size(); i += kPairsPerRecord * 2) {
            v.clear();
            for (size_t j = i; j < std::min(orders->size(), i + kPairsPerRecord * 2); ++j) {
                v.push_back(fold_of((*orders)[j]));
            }
            figure(name, v);
        }
    }
    figure("reader.run", {at.run.first, at.run.second});
    if (at.backward != nullptr) at.backward->fold_out(*this);
    if (at.freed != nullptr) {
        figure("reader.frees", {fold_of(at.frees)});
        for (const auto& [seq, b] : *at.freed) {
            // Its free: rank, time, thread, then the call's name.
            std::vector<int64_t> values{fold_of(seq), fold_of(b->order), b->t_free.value_or(0), fold_of(b->free_tid),
                                        fold_of(b->free_api.size())};
            for (char c : b->free_api) values.push_back(static_cast<unsigned char>(c));
            block("reader.freed", *b, values);
        }
    }
    if (at.uncarried != nullptr) {
        for (const Block* b : *at.uncarried) block("reader.live", *b, {fold_of(b->order)});
    }
    if (at.warnings != nullptr) at.warnings->fold_out(*this);
    if (at.explanations != nullptr) {
        for (size_t e = 0; e < at.explanations->size(); ++e) {
            const std::vector<GarbageTensor>& storages = (*at.explanations)[e].storages;
            for (size_t i = 0; i < storages.size(); i += 90) {
                v = {fold_of(e), fold_of(i)};
                for (size_t j = i; j < std::min(storages.size(), i + 90); ++j) {
                    v.insert(v.end(),
                             {storages[j].stack_id, storages[j].python_stack_id, storages[j].site_is_segment ? 1 : 0});
                }
                figure("reader.garbage", v);
            }
        }
    }
    if (at.extra_events == nullptr) return;
    const auto& extra = *at.extra_events;
    for (size_t i = 0; i < extra.size(); i += kPairsPerRecord) {
        v.clear();
        for (size_t j = i; j < std::min(extra.size(), i + kPairsPerRecord); ++j) {
            v.push_back(fold_of(extra[j].first));
            v.push_back(extra[j].second);
        }
        figure("reader.extra_events", v);
    }
}

void FoldWriter::figure(std::string_view name, const std::vector<int64_t>& values) {
    append_figure(text_, name, 0, values.data(), values.size());
}

void FoldWriter::figure(std::string_view name, std::initializer_list<int64_t> values) {
    append_figure(text_, name, 0, values.begin(), values.size());
}

void FoldWriter::block(std::string_view name, const Block& b, std::initializer_list<int64_t> values) {
    block(name, b, std::vector<int64_t>(values));
}

void FoldWriter::block(std::string_view name, const Block& b, const std::vector<int64_t>& values) {
    format::Line line;
    format::encode(format::rec::Alloc{b.t_alloc, b.tid, b.addr, b.size, b.kind, b.api, b.device, b.stream, b.stack_id,
                                      b.capture_id, b.python_stack_id},
                   line);
    with_copy(name, values, line.finish());
}

void FoldWriter::tensor(std::string_view name, const Tensor& x, std::initializer_list<int64_t> values) {
    format::Line line;
    format::encode(format::rec::TensorAlloc{x.t_alloc, x.tid, x.addr, x.size, x.requested, x.device, x.stream,
                                            x.stack_id, x.python_stack_id, x.capture_id, x.pool},
                   line);
    with_copy(name, std::vector<int64_t>(values), line.finish());
}

void FoldWriter::with_copy(std::string_view name, std::vector<int64_t> values, std::string_view copy) {
    // The live sets an observer keeps overlap (a step's peak and its end, the peak of the run, an
    // OOM's): a copy already in the fold is named by its number, not written again.
    const auto [it, added] = copies_.try_emplace(std::string(copy), copies_.size());
    if (!added) {
        values.push_back(static_cast<int64_t>(it->second));
        append_figure(text_, name, 2, values.data(), values.size());
        return;
    }
    append_figure(text_, name, 1, values.data(), values.size());
    text_ += copy;
}

int64_t fold_value(const Fold::Figure& f, size_t i, int64_t min) {
    if (i >= f.values.size()) {
        throw BadFold("figure " + f.name + " has " + std::to_string(f.values.size()) + " values, " +
                      std::to_string(i + 1) + " expected");
    }
    if (f.values[i] < min) {
        throw BadFold("figure " + f.name + ": value " + std::to_string(f.values[i]) + " below " + std::to_string(min));
    }
    return f.values[i];
}

std::pair<int64_t, int64_t> run_of(const Report& r) {
    auto value = [&r](const char* key) -> int64_t {
        auto it = r.info.find(key);
        if (it == r.info.end()) return -1;
        const std::optional<uint64_t> v = text::parse_dec(it->second);
        return v && *v <= static_cast<uint64_t>(INT64_MAX) ? static_cast<int64_t>(*v) : -1;
    };
    return {value("pid"), value("t0_unix_ns")};
}

std::string fold_path(const std::string& spine, unsigned part) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%06u", part);
    return spine + std::string(kFoldSuffix) + suffix;
}

std::vector<unsigned> find_folds(const std::string& spine) {
    std::vector<unsigned> folds = numbered_beside(spine, kFoldSuffix);
    std::reverse(folds.begin(), folds.end());
    return folds;
}

namespace {

constexpr size_t kMaxFoldText = size_t{1} << 30;  // what a fold may unpack to: a damaged one stops there

}  // namespace

std::string pack_fold(const std::string& text) {
    // gzip (deflate with its header): `zcat` reads a fold, and a reader tells it from a plain one
    // by its first two bytes. One deflate call: zlib counts its input in 32 bits.
    if (text.size() > kMaxFoldText) {
        throw ReportError("a fold of " + std::to_string(text.size()) + " bytes: more than a reader takes (1 GiB)");
    }
    z_stream z{};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        throw ReportError("cannot start compressing a fold (zlib)");
    }
    std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw ReportError("cannot compress a fold (zlib: " + std::to_string(rc) + ")");
    return out;
}

std::optional<std::string> fold_text(const std::string& path, std::string& error) {
    std::FILE* file = open_report(path);
    if (file == nullptr) {
        error = path + ": cannot open (" + std::strerror(errno) + ")";
        return std::nullopt;
    }
    std::string raw;
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) raw.append(buf, n);
    const bool failed = std::ferror(file) != 0;
    const int read_errno = errno;  // fclose may change it
    std::fclose(file);
    if (failed) {
        error = path + ": cannot read (" + std::strerror(read_errno) + ")";
        return std::nullopt;
    }
    if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b) {
        return raw;
    }
    if (raw.size() > kMaxFoldText) {  // deflate never grows text this much: no fold packs to this
        error = path + ": a damaged fold (a gzip file of " + std::to_string(raw.size()) + " bytes)";
        return std::nullopt;
    }
    z_stream z{};
    if (inflateInit2(&z, 15 + 16) != Z_OK) {
        error = path + ": cannot start unpacking the fold (zlib)";
        return std::nullopt;
    }
    std::string text;
    z.next_in = reinterpret_cast<Bytef*>(raw.data());
    z.avail_in = static_cast<uInt>(raw.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (text.size() >= kMaxFoldText) break;
        const size_t at = text.size();
        text.resize(std::min(kMaxFoldText, at + std::max<size_t>(raw.size() * 4, 1 << 16)));
        z.next_out = reinterpret_cast<Bytef*>(text.data() + at);
        z.avail_out = static_cast<uInt>(text.size() - at);
        rc = inflate(&z, Z_NO_FLUSH);
        text.resize(z.total_out);
        if (rc == Z_BUF_ERROR && z.avail_in > 0) rc = Z_OK;  // the output was full: more room
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        error = path + ": a damaged fold (its gzip stream " +
                (text.size() >= kMaxFoldText ? std::string("unpacks to more than 1 GiB") : "ends short or is broken") +
                ")";
        return std::nullopt;
    }
    return text;
}

std::optional<Fold> read_fold(const std::string& path, const std::string& magic, std::string& error) {
    std::optional<std::string> text = fold_text(path, error);
    if (!text) return std::nullopt;
    if (text->empty()) {  // fmemopen takes no empty buffer
        error = path + ": not a fold of this report (it is empty)";
        return std::nullopt;
    }
    std::FILE* file = ::fmemopen(text->data(), text->size(), "r");
    if (file == nullptr) {
        error = path + ": cannot read the fold (" + std::strerror(errno) + ")";
        return std::nullopt;
    }
    struct Closer {
        std::FILE* f;
        ~Closer() { std::fclose(f); }
    } closer{file};
    LineReader reader(file, path);
    std::string_view line;
    if (reader.next(line) != LineReader::Line || line != magic) {
        error = path + ": not a fold of this report (its first line is not '" + magic + "')";
        return std::nullopt;
    }
    Fold fold;
    fold.at.magic = magic;
    format::Decoder decoder;
    std::vector<std::string_view> f;
    int minor = 0;
    bool at = false;
    size_t line_no = 1;
    uint64_t copies = 0;              // A or T records still to come for the last figure
    std::vector<size_t> copy_owners;  // the figure that owns each copy, in file order
    try {
        for (;;) {
            const LineReader::Status got = reader.next(line);
            if (got == LineReader::End) break;
            ++line_no;
            if (got != LineReader::Line) {
                error = path + ":" + std::to_string(line_no) + ": cut short or too long (a fold being written?)";
                return std::nullopt;
            }
            split_fields(line, f);
            if (f.empty() || f[0].size() != 1) throw format::Malformed("not a record");
            const char letter = f[0][0];
            if (copies > 0) {
                Fold::Figure& owner = fold.figures.back();
                --copies;
                copy_owners.push_back(fold.figures.size() - 1);
                if (letter == format::rec::Alloc::kLetter) {
                    format::rec::Alloc r;
                    decoder.read(f, minor, r);
                    Block b;
                    b.t_alloc = r.t, b.tid = r.tid, b.addr = r.addr, b.size = r.size, b.kind = r.kind;
                    b.api = std::string(r.api);
                    b.device = r.device, b.stream = r.stream, b.stack_id = r.stack_id, b.capture_id = r.capture_id;
                    b.python_stack_id = r.python_stack_id;
                    owner.block = std::move(b);
                } else if (letter == format::rec::TensorAlloc::kLetter) {
                    format::rec::TensorAlloc r;
                    decoder.read(f, minor, r);
                    Tensor x;
                    x.t_alloc = r.t, x.tid = r.tid, x.addr = r.addr, x.size = r.size, x.requested = r.requested;
                    x.device = r.device, x.stream = r.stream, x.stack_id = r.stack_id;
                    x.python_stack_id = r.python_stack_id, x.capture_id = r.capture_id;
                    x.pool = std::string(r.pool);
                    owner.tensor = std::move(x);
                } else {
                    throw format::Malformed("figure " + owner.name + " is followed by a '" + std::string(1, letter) +
                                            "' record, not its copy (A or T)");
                }
                continue;
            }
            switch (letter) {
            case format::rec::Info::kLetter: {
                format::rec::Info r;
                decoder.read(f, minor, r);
                if (r.key == "format_minor") {
                    const std::optional<uint64_t> m = text::parse_dec(r.value);
                    if (!m || *m > static_cast<uint64_t>(format::kFormatMinor)) {
                        error = path + ": written by a newer memguard (format minor " + std::string(r.value) + ")";
                        return std::nullopt;
                    }
                    minor = static_cast<int>(*m);
                }
                break;
            }
            case format::rec::FoldAt::kLetter: {
                format::rec::FoldAt r;
                decoder.read(f, minor, r);
                if (r.part == 0 || r.part > 0xffffffffu) throw format::Malformed("part out of range");
                fold.at.part = static_cast<unsigned>(r.part);
                fold.at.position = r.position;
                fold.at.events = r.events;
                fold.at.blocks = r.blocks;
                fold.at.tensors = r.tensors;
                fold.at.t = r.t;
                fold.at.dropped = r.dropped;
                fold.at.dropped_until = r.dropped_until;
                if (r.dropped_parts > 0xffffffffu) throw format::Malformed("dropped_parts out of range");
                fold.at.dropped_parts = static_cast<unsigned>(r.dropped_parts);
                at = true;
                break;
            }
            case format::rec::Figure::kLetter: {
                format::rec::Figure r;
                decoder.read(f, minor, r);
                if (r.copies > 2) throw format::Malformed("a figure owns one copy at most");
                if (r.name == "reader.run") {
                    if (r.values.size != 2) throw format::Malformed("reader.run needs a pid and a start time");
                    fold.at.run = {r.values.data[0], r.values.data[1]};
                    break;
                }
                if (r.name == "reader.extra_events") {
                    if (r.values.size % 2 != 0) throw format::Malformed("reader.extra_events needs pairs");
                    for (size_t i = 0; i < r.values.size; i += 2) {
                        if (r.values.data[i] < 0) throw format::Malformed("negative position");
                        if (!fold.extra.empty() && static_cast<uint64_t>(r.values.data[i]) < fold.extra.back().first) {
                            throw format::Malformed("reader.extra_events out of order");
                        }
                        fold.extra.emplace_back(static_cast<uint64_t>(r.values.data[i]), r.values.data[i + 1]);
                    }
                    break;
                }
                if (r.name == "reader.carried_blocks" || r.name == "reader.carried_tensors") {
                    auto& to = r.name == "reader.carried_blocks" ? fold.carried_blocks : fold.carried_tensors;
                    for (size_t i = 0; i < r.values.size; ++i) to.push_back(static_cast<size_t>(r.values.data[i]));
                    break;
                }
                Fold::Figure x;
                x.name = std::string(r.name);
                x.values.assign(r.values.data, r.values.data + r.values.size);
                if (r.copies == 2) {
                    // The copy of an earlier figure: its number (among the fold's copies) is the last value.
                    if (x.values.empty() || x.values.back() < 0 ||
                        static_cast<uint64_t>(x.values.back()) >= copy_owners.size()) {
                        throw format::Malformed("figure " + x.name + " names a copy the fold has not given");
                    }
                    const Fold::Figure& owner = fold.figures[copy_owners[static_cast<size_t>(x.values.back())]];
                    x.values.pop_back();
                    x.block = owner.block;
                    x.tensor = owner.tensor;
                    fold.figures.push_back(std::move(x));
                    break;
                }
                fold.figures.push_back(std::move(x));
                copies = r.copies;
                break;
            }
            default: throw format::Malformed("a '" + std::string(1, letter) + "' record has no place in a fold");
            }
        }
    } catch (const format::Malformed& m) {
        error = path + ":" + std::to_string(line_no) + ": " + m.what();
        return std::nullopt;
    }
    if (!at || copies > 0) {
        error = path + ": " + (at ? "its last figure's copy is missing" : "no 'a' record") + " (not a whole fold)";
        return std::nullopt;
    }
    return fold;
}

void write_fold(const std::string& spine, unsigned part, const std::string& text) {
    const std::string path = fold_path(spine, part);
    // A new file of a name no one can have placed (a link, a file of someone else's) in its way.
    std::string tmp = path + ".tmp-XXXXXX";
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) throw ReportError(path + ": cannot create the fold beside it (" + std::strerror(errno) + ")");
    ::fchmod(fd, 0644);
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            throw ReportError(tmp + ": cannot write the fold (" + std::strerror(err) + ")");
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw ReportError(path + ": cannot put the fold in place (" + std::strerror(err) + ")");
    }
    for (unsigned older : find_folds(spine)) {
        if (older < part) ::unlink(fold_path(spine, older).c_str());
    }
}

namespace {

/// The breakdowns `steps` asks for: no sites (module files read where the fold is written).
BreakdownOptions steps_options() {
    BreakdownOptions o;
    o.max_sites = 0;
    return o;
}

/// The observers whose figures a fold holds (those of every command that answers for the whole run:
/// summary, top --at peak, phases, diff, steps, oom, cycles, merge), and the hook that writes them
/// where the fold stands.
class Folder : public EventObserver {
public:
    explicit Folder(unsigned through)
        : through_(through), peaks_(PeakObserver::Budget::None), ooms_(true), steps_(rows_, tags_, steps_options()) {}
    bool on_event(const Report& r, const Event& e) override { return all_.on_event(r, e); }
    void on_phase(const Report& r, size_t phase) override { all_.on_phase(r, phase); }
    void on_end(const Report& r) override { all_.on_end(r); }
    void fold_in(const Report& r, const Fold& f) override { all_.fold_in(r, f); }
    bool at_part(const Report& r, const FoldPoint& at) override {
        if (at.part != through_) return true;
        FoldWriter w(at);
        all_.fold_out(r, w);
        text_ = w.text();
        return false;
    }
    const std::optional<std::string>& text() const { return text_; }

private:
    unsigned through_;
    SummaryBuilder summary_;
    PeakObserver peaks_;
    TensorTagObserver tags_;
    OomObserver ooms_;
    CollectionFreesObserver collections_;
    PhaseObserver phases_;
    StepRowsObserver rows_;
    StepPointsFolder steps_;  // after rows_ and tags_, which it reads
    Observers all_{{&summary_, &peaks_, &tags_, &ooms_, &collections_, &phases_, &rows_, &steps_}};
    std::optional<std::string> text_;
};

}  // namespace

CompactResult compact_report(const std::string& spine, std::optional<unsigned> through, const MayWrite& may_write) {
    CompactResult out;
    const std::vector<unsigned> folds = find_folds(spine);
    const unsigned newest = folds.empty() ? 0 : folds.front();
    std::vector<unsigned> parts = detail_part_numbers(spine);
    if (parts.empty()) {
        throw ReportError(spine + ": no detail parts beside it (" + spine +
                          ".part-000001, ...): not a bounded report, or its parts were removed");
    }
    unsigned target = 0;
    if (through) {
        target = *through;
        if (!std::binary_search(parts.begin(), parts.end(), target + 1)) {
            throw ReportError(spine + ": no detail part " + std::to_string(target + 1) +
                              " beside it: a fold through part " + std::to_string(target) +
                              " stands where that part begins");
        }
    } else {
        // The newest part but one: the writer may still be writing the newest.
        if (parts.size() < 2) {
            out.part = newest;
            out.message = spine + ": one detail part, which the writer may still be writing: nothing to fold";
            return out;
        }
        target = parts[parts.size() - 2];
    }
    if (target <= newest) {
        out.part = newest;
        out.message = spine + ": already folded through part " + std::to_string(newest);
        return out;
    }
    Folder folder(target);
    stream_report(spine, folder);
    if (!folder.text()) {
        throw ReportError(spine + ": the read did not reach detail part " + std::to_string(target + 1) +
                          " (a part before it is missing or cut short?)");
    }
    std::string packed = pack_fold(*folder.text());
    if (may_write && !may_write(packed.size(), target)) {
        out.part = newest;
        out.through = target;
        out.unwritten = std::move(packed);
        out.message = spine + ": the fold through detail part " + std::to_string(target) + " (" +
                      std::to_string(out.unwritten.size()) + " bytes) waits for room under the report's limit";
        return out;
    }
    write_fold(spine, target, packed);
    out.part = target;
    out.wrote = true;
    out.message = spine + ": folded through detail part " + std::to_string(target) + " (" + fold_path(spine, target) +
                  ")";
    return out;
}

}  // namespace memguard::report

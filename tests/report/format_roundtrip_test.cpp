// The record table (src/format/) end to end: every record type, with edge-case values, written by
// the writer's encoders into a file that the reader's load_report() reads back; each field is
// compared with what the reader made of it. A field added to the table fails
// FormatRoundTrip.EveryFieldOfEveryRecordIsCompared until this test compares it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "format/binary.h"
#include "format/binary_decode.h"
#include "format/decode.h"
#include "format/encode.h"
#include "format/table.h"
#include "report/fold.h"
#include "report/report.h"

namespace memguard::report {
namespace {

namespace rec = format::rec;
using format::Field;
using format::Tail;

constexpr int64_t kMaxT = format::kMaxTimeNs;
constexpr int64_t kMinT = -format::kMaxTimeNs;
constexpr uint64_t kU64 = UINT64_MAX;
constexpr uint32_t kU32 = UINT32_MAX;

/// A record's fields as text, to compare a record with its decoded copy whatever its fields are.
struct Flatten {
    std::vector<std::pair<std::string, std::string>> out;

    static std::string str(int64_t v) { return std::to_string(v); }
    static std::string str(int v) { return std::to_string(v); }
    static std::string str(uint64_t v) { return std::to_string(v); }
    static std::string str(uint32_t v) { return std::to_string(v); }
    static std::string str(bool v) { return v ? "true" : "false"; }
    static std::string str(std::string_view v) { return "[" + std::string(v) + "]"; }
    template <class E, class = decltype(format::name_of(E{}))>
    static std::string str(E v) {
        return std::string(format::name_of(v));
    }
    template <class T>
    static std::string str(const std::optional<T>& v) {
        return v ? str(*v) : "<absent>";
    }
    template <class T>
    static std::string str(const Tail<T>& v) {
        std::string s = std::to_string(v.size) + ":";
        for (size_t i = 0; i < v.size; ++i) s += " " + str(v.data[i]);
        return s;
    }
    template <class T>
    void operator()(const Field& f, const T& v) {
        out.emplace_back(f.name, str(v));
    }
    void key(const Field& f, std::string_view k) { out.emplace_back(f.name, std::string(k)); }
};

template <class R>
std::vector<std::pair<std::string, std::string>> flatten(const R& r) {
    Flatten f;
    R::fields(f, r);
    return f.out;
}

std::string record_name(char letter, std::string_view key) {
    return std::string(1, letter) + (key.empty() ? "" : " " + std::string(key));
}

template <class R>
std::string record_name() {
    return record_name(R::kLetter, format::describe<R>().key);
}

/// Builds a report through the encoders. Each record is also decoded straight back by the table's
/// decoder and compared field by field (the codec alone, before the reader applies it).
/// In binary (format/binary.h) when `binary`: the predicted records against the predictions of
/// the records before them, decoded back by one decoder that follows them.
class Writer {
public:
    /// `part`: a bounded report's detail part (minor 10), whose header line has no I record after it.
    explicit Writer(bool binary, bool part = false) : binary_(binary) {
        // Binary: the encoding the Predictions code (binary::kVersion, their default).
        text_ = std::string(binary ? format::kBinaryMagic : std::string_view("MEMGUARD-REPORT")) + " " +
                std::to_string(binary ? format::binary::kVersion : format::kFormatVersion) + "\n";
        if (!part) add(rec::Info{"format_minor", std::to_string(format::kFormatMinor)});
    }
    template <class R>
    void add(const R& r) {
        written_.insert(record_name<R>());
        if (binary_) {
            std::string_view frame;
            if constexpr (format::is_predicted<R>()) {
                frame = format::encode_predicted(r, predictions_, values_, frame_);
            } else {
                frame = format::encode_plain(r, frame_);
            }
            text_.append(frame);
            // The codec alone: the frame's letter, length and payload, decoded.
            ASSERT_EQ(frame[0], R::kLetter);
            uint64_t length = 0;
            const char* payload = format::get_varint(frame.data() + 1, frame.data() + frame.size(), &length);
            ASSERT_NE(payload, nullptr);
            ASSERT_EQ(payload + length, frame.data() + frame.size());
            R back{};
            binary_decoder_.read(std::string_view(payload, length), format::kFormatMinor, back);
            EXPECT_EQ(flatten(back), flatten(r)) << "decoding " << record_name<R>() << " from binary";
            return;
        }
        format::Line line;
        format::encode(r, line);
        std::string_view text = line.finish();
        text_.append(text);
        // The codec alone: split like the reader, decode, compare.
        std::vector<std::string_view> fields;
        std::string_view body = text.substr(0, text.size() - 1);
        for (size_t start = 0;;) {
            size_t sp = body.find(' ', start);
            fields.push_back(body.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start));
            if (sp == std::string_view::npos) break;
            start = sp + 1;
        }
        R back{};
        format::Decoder decoder;
        decoder.read(fields, format::kFormatMinor, back);
        EXPECT_EQ(flatten(back), flatten(r)) << "decoding " << text;
        written_.insert(record_name<R>());
    }
    /// Writes the report to a temporary file and reads it with load_report.
    Report load() {
        char path[] = "/tmp/memguard_roundtrip_XXXXXX";
        int fd = mkstemp(path);
        EXPECT_GE(fd, 0);
        EXPECT_EQ(write(fd, text_.data(), text_.size()), static_cast<ssize_t>(text_.size()));
        close(fd);
        Report r = load_report(path);
        unlink(path);
        return r;
    }
    const std::set<std::string>& written() const { return written_; }
    const std::string& text() const { return text_; }

private:
    bool binary_;
    std::string text_;
    std::set<std::string> written_;
    format::binary::Predictions predictions_;
    format::Frame values_, frame_;
    format::BinaryDecoder binary_decoder_;
};

/// Compares written fields with what the reader made of them, and remembers which fields were.
class Checker {
public:
    template <class R>
    void in() {
        current_ = record_name<R>();
    }
    template <class A, class B>
    void eq(const char* field, const A& written, const B& read) {
        EXPECT_TRUE(read == written) << current_ << " field " << field;
        seen_[current_].insert(field);
    }
    /// A field the reader checks and then drops (nothing in Report keeps it).
    void not_kept(const char* field) { seen_[current_].insert(field); }
    const std::map<std::string, std::set<std::string>>& seen() const { return seen_; }

private:
    std::string current_;
    std::map<std::string, std::set<std::string>> seen_;
};

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? "," : "") + parts[i];
    return out;
}

template <class T>
std::vector<T> tail_values(size_t n, T first, T last) {
    std::vector<T> v;
    v.push_back(first);
    for (size_t i = 1; i + 1 < n; ++i) v.push_back(static_cast<T>(i * 0x9e3779b97f4a7c15ull));
    v.push_back(last);
    return v;
}

// Strings that need percent-encoding: space, '%', control bytes, DEL, bytes above 0x7f.
const std::string kOdd = std::string("a b%c\t\n\x01\x7f\xc3\xa9-") + "end";

/// Both encodings: text (false) and binary (true).
struct RoundTrip : ::testing::TestWithParam<bool> {
    Writer w{GetParam()};
    Checker c;
};

INSTANTIATE_TEST_SUITE_P(Encodings, RoundTrip, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Binary" : "Text"; });

TEST_P(RoundTrip, EveryRecordOfTheTableSurvivesWritingAndReading) {
    const std::vector<uint64_t> ips = tail_values<uint64_t>(300, 0, kU64);
    const std::vector<uint32_t> frames = tail_values<uint32_t>(200, 1, kU32);

    // Meta records.
    const rec::Info info{kOdd, ""};
    const rec::Module m1{0, 0, kU64, kU64, "00ff0a", kOdd};
    const rec::Module m2{kU32, 5, 5, 0, "", ""};
    const rec::Stack s1{kU32, Tail<uint64_t>{ips.data(), ips.size()}};
    const rec::PyFrame p1{1, INT32_MIN, "", kOdd};
    const rec::PyFrame p2{kU32, INT32_MAX, kOdd, "f.py"};
    const rec::PyStack ps{kU32, Tail<uint32_t>{frames.data(), frames.size()}};
    w.add(info), w.add(m1), w.add(m2), w.add(s1), w.add(p1), w.add(p2), w.add(ps);

    // Blocks.
    const rec::Alloc a1{kMinT,        kU64, kU64, kU64, format::Kind::Pinned, "cuMemAllocHost", -1,
                        std::nullopt, kU32, 0,    kU32};
    const rec::Alloc a2{kMaxT, 0, 0, 0, format::Kind::Managed, "cudaMallocManaged", 1023, uint64_t{0}, 0, kU32, 0};
    const rec::Free f2{5, kU64, 0, kU64, "unseen", kU64};
    const rec::Restore r2{-7, 3, 0, INT32_MIN};
    const rec::Failure e1{0, 1, kU64, format::Kind::Async, "cudaMallocAsync", 1023, kU64, 0, INT32_MIN, kU64, 0};
    const rec::Failure e2{kMinT,     kU64, 0,   format::Kind::Device, "cuMemAlloc", -1, std::nullopt, kU32,
                          INT32_MAX, 0,    kU32};
    w.add(a1), w.add(a2), w.add(f2), w.add(r2), w.add(e1), w.add(e2);

    // Graphs.
    const rec::CaptureBegin cb1{kMinT, kU64, kU32, kU64, format::CaptureMode::Relaxed, std::nullopt};
    const rec::CaptureBegin cb2{kMaxT, 0, 1, 0, format::CaptureMode::ThreadLocal, uint64_t{0}};
    const rec::CaptureEnd ce2{1, 2, 1, INT32_MIN, kU64};
    const rec::CaptureEnd ce1{2, kU64, kU32, INT32_MAX, std::nullopt};
    const rec::Instantiate g{kMaxT, kU64, kU64, 0, 0};
    const rec::Launch l{kMinT, 0, kU64, kU64};
    const rec::ExecDestroy d{kMaxT, kU64, kU64};
    const rec::GraphDestroy k{kMinT, kU64, kU64};
    const rec::UnsafeCall wu{kMaxT,
                             kU64,
                             "cudaMalloc",
                             1,
                             format::CaptureMode::Global,
                             format::CaptureMode::ThreadLocal};
    const rec::FreeLiveGraph wf{kMinT, 0, kU64, kU64, kU32, kU64};
    const rec::WarmupRetention ww{0, kU64, kU32, format::CapturePhase::End, kMinT, kU32, kU64, 0};
    w.add(cb1), w.add(cb2), w.add(ce2), w.add(ce1), w.add(g), w.add(l), w.add(d), w.add(k), w.add(wu), w.add(wf);
    w.add(ww);

    // Events.
    const rec::Compile x1{kMinT, kU64, ""};
    const rec::Compile x2{kMaxT, 0, kOdd};
    const rec::Collection y1{kMaxT,     kU64,       format::GcTrigger::Memguard,      INT32_MIN, kMaxT, -INT64_MAX,
                             INT64_MAX, -INT64_MAX, std::string_view("0/1,1/0,%x y"), kMinT,     kU64,  std::nullopt};
    const rec::Collection y2{kMinT,
                             0,
                             format::GcTrigger::Automatic,
                             INT32_MAX,
                             kMinT,
                             0,
                             0,
                             std::nullopt,
                             std::nullopt,
                             std::nullopt,
                             std::nullopt,
                             std::nullopt};
    const rec::PhaseBegin b1{kMinT, kU64, kU32, format::PhaseSource::NvtxRange, kOdd};
    const rec::PhaseBegin b2{kMaxT, 0, 1, format::PhaseSource::Api, ""};
    const rec::PhaseEnd be{kMaxT, kU64, 1};
    const rec::Mark j{kMinT, kU64, format::PhaseSource::Nvtx, kOdd};
    w.add(x1), w.add(x2), w.add(y1), w.add(y2), w.add(b1), w.add(b2), w.add(be), w.add(j);

    // Virtual memory.
    const rec::Reserve v1{kMinT, kU64, kU64, kU64, kU32, kU32};
    const rec::AddressFree vf{kMaxT, 0, kU64, 0};
    const rec::Create n1{kMinT, kU64, kU64, kU64, -1, kU32, kU32, kU32};
    const rec::Create n2{kMaxT, 0, 0, 0, 1023, 0, 0, 0};
    const rec::Map q1{kMinT, kU64, 0, kU64, kU64, 0};
    const rec::Unmap uq{kMaxT, 0, 0, 1};
    const rec::Release nr{kMaxT, kU64, kU64};
    const rec::Import im{kMinT, kU64, 0x77, kU32, kU32};
    w.add(v1), w.add(vf), w.add(n1), w.add(n2), w.add(q1), w.add(uq), w.add(nr), w.add(im);

    // Tensors.
    const rec::TensorAlloc t1{kMinT, kU64, kU64, 0, 0, -1, kU64, kU32, kU32, kU32, "1.18446744073709551615"};
    const rec::TensorAlloc t2{kMaxT, 0, 0, kU64, kU64, 1023, 0, 0, 0, 0, "-"};
    const rec::TensorFree tf{kMaxT, kU64, kU64, true};
    const rec::TensorOom o{kMaxT, kU64, 1023, kU64, kU64, kU64, kU64, kU64, kU32, kU32, format::Rescue::Gc};
    const rec::TensorOomSite os1{kMaxT, kU32, kU32, kU64, kU64};
    const rec::TensorOomSite os2{kMaxT, 0, 0, 0, 0};
    w.add(t1), w.add(t2);

    // Cycles (minor 9): an explanation, named by the Y after it while t1 is live (its storage's site
    // is t1's); gt2's address is no live block's. A second explanation no Y names.
    const rec::Info budget{"gc_budget", "0.25"};
    const rec::Explanation ej{kMaxT, kU64, kU32, kU64, kU64, kU64, kMaxT, true};
    const rec::GarbageGroup ug1{kU32, format::GarbageKind::Frame, kU64, kU64, kOdd};
    const rec::GarbageGroup ug2{kU32, format::GarbageKind::Type, 0, 0, ""};
    const rec::GarbageTensor gt1{kU32, -1, kU64, kU64, format::HeldHow::Saved, format::Category::Activation, kOdd};
    const rec::GarbageTensor gt2{kU32,        1023, 5, 0, format::HeldHow::Tensor, format::Category::OtherTensor,
                                 std::nullopt};
    const rec::ChainStep cs0{kU32, kU64, 0, kOdd, std::string_view(kOdd)};
    const rec::ChainStep cs1{kU32, kU64, 1, "", std::nullopt};
    const rec::Collection
        y3{kMaxT,       kU64, format::GcTrigger::Recompute, 0, 0, 0, 0, std::nullopt, std::nullopt, std::nullopt,
           uint64_t{0}, kU32};
    const rec::Explanation ej2{kMinT, 0, 1, 0, 0, 0, 0, false};
    w.add(budget), w.add(ej), w.add(ug1), w.add(ug2), w.add(gt1), w.add(gt2), w.add(cs0), w.add(cs1), w.add(y3);
    w.add(ej2);

    w.add(tf), w.add(o), w.add(os1), w.add(os2);

    const rec::Step st{kMaxT, kU64, kU32, format::StepSource::Api, kOdd};
    const rec::MomentBegin hb{kMaxT, kU64, kU32, format::MomentReason::Oom, kU32};
    const rec::TensorTag tg1{kU32, 1023, kU64, kU64, format::Category::OtherTensor, kOdd};
    const rec::TensorTag tg2{kU32, 0, 0, 0, format::Category::Parameter, std::nullopt};
    const rec::AllocatorBlock ab{kU32, 1023, kU64, kU64, kU64, format::BlockState::PendingFree, kU64, "3.4"};
    const rec::OomContext ox{kMaxT,          kU64, 1023,         format::OomSource::Cuda,
                             uint64_t{kU64}, kU64, std::nullopt, kU64,
                             kU64,           kU64, std::nullopt, kU32,
                             kU32,           kU32, true,         true};
    const rec::MomentEnd ke{kMaxT, kU32, 2, 1, true};
    w.add(st), w.add(hb), w.add(tg1), w.add(tg2), w.add(ab), w.add(ox), w.add(ke);

    const rec::Lost u{kMaxT, kMinT, kU64};
    const rec::PythonPath ip1{format::PathKind::InductorCache, std::string_view(kOdd)};
    const rec::PythonPath ip2{format::PathKind::Torch, "/usr/lib/python3/dist-packages/torch"};
    const rec::End z{kMaxT};
    w.add(u), w.add(ip1), w.add(ip2), w.add(ip2), w.add(z);

    const Report rep = w.load();

    c.in<rec::Info>();
    c.eq("key", std::string(kOdd), rep.info.count(kOdd) ? kOdd : std::string("<missing>"));
    c.eq("value", std::string(), rep.info.at(kOdd));
    EXPECT_EQ(rep.info.at("format_minor"), std::to_string(format::kFormatMinor));
    EXPECT_EQ(rep.gc_budget, std::optional<double>(0.25));

    c.in<rec::Module>();
    ASSERT_EQ(rep.modules.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::Module& wm = i == 0 ? m1 : m2;
        const Module& rm = rep.modules[i];
        c.eq("module_id", wm.module_id, rm.id);
        c.eq("lo", wm.lo, rm.lo);
        c.eq("hi", wm.hi, rm.hi);
        c.eq("bias", wm.bias, rm.bias);
        c.eq("build_id", std::string(wm.build_id), rm.build_id);
        c.eq("path", std::string(wm.path), rm.path);
    }

    c.in<rec::Stack>();
    ASSERT_EQ(rep.stacks.count(kU32), 1u);
    c.eq("stack_id", s1.stack_id, rep.stacks.at(kU32).id);
    c.eq("ip", ips, rep.stacks.at(kU32).ips);

    c.in<rec::PyFrame>();
    for (const rec::PyFrame* wp : {&p1, &p2}) {
        ASSERT_EQ(rep.python_frames.count(wp->frame_id), 1u);
        const PythonFrame& rp = rep.python_frames.at(wp->frame_id);
        c.eq("frame_id", wp->frame_id, rp.id);
        c.eq("line", wp->line, rp.line);
        c.eq("function", std::string(wp->function), rp.function);
        c.eq("filename", std::string(wp->filename), rp.filename);
    }

    c.in<rec::PyStack>();
    ASSERT_EQ(rep.python_stacks.count(kU32), 1u);
    c.eq("python_stack_id", ps.python_stack_id, rep.python_stacks.at(kU32).id);
    c.eq("frame_id", frames, rep.python_stacks.at(kU32).frames);

    c.in<rec::Alloc>();
    ASSERT_EQ(rep.blocks.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::Alloc& wa = i == 0 ? a1 : a2;
        const Block& rb = rep.blocks[i];
        c.eq("t", wa.t, rb.t_alloc);
        c.eq("tid", wa.tid, rb.tid);
        c.eq("addr", wa.addr, rb.addr);
        c.eq("size", wa.size, rb.size);
        c.eq("kind", wa.kind, rb.kind);
        c.eq("api", std::string(wa.api), rb.api);
        c.eq("device", wa.device, rb.device);
        c.eq("stream", wa.stream, rb.stream);
        c.eq("stack_id", wa.stack_id, rb.stack_id);
        c.eq("capture_id", wa.capture_id, rb.capture_id);
        c.eq("python_stack_id", wa.python_stack_id, rb.python_stack_id);
    }

    // F freed a2, R revived it: the F's time and api are in the Free event, R's time in the Restore.
    c.in<rec::Free>();
    const Event* free_event = nullptr;
    const Event* restore_event = nullptr;
    for (const Event& e : rep.events) {
        if (e.type == Event::Free && e.block == 1) free_event = &e;
        if (e.type == Event::Restore && e.block == 1) restore_event = &e;
    }
    ASSERT_NE(free_event, nullptr);
    ASSERT_NE(restore_event, nullptr);
    c.eq("t", f2.t, free_event->t);
    c.eq("addr", f2.addr, rep.blocks[free_event->block].addr);
    c.not_kept("tid");
    c.not_kept("size");
    c.not_kept("stream");
    c.in<rec::Restore>();
    c.eq("t", r2.t, restore_event->t);
    c.eq("addr", r2.addr, rep.blocks[restore_event->block].addr);
    EXPECT_FALSE(rep.blocks[1].t_free.has_value());  // revived
    c.not_kept("tid");
    c.not_kept("error");
    // The api of F: a free that stays (a1 is never freed; check through a second file below).

    c.in<rec::Failure>();
    ASSERT_EQ(rep.failures.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::Failure& we = i == 0 ? e1 : e2;
        const FailedAlloc& re = rep.failures[i];
        c.eq("t", we.t, re.t);
        c.eq("tid", we.tid, re.tid);
        c.eq("size", we.size, re.size);
        c.eq("kind", we.kind, re.kind);
        c.eq("api", std::string(we.api), re.api);
        c.eq("device", we.device, re.device);
        c.eq("stream", we.stream, re.stream);
        c.eq("stack_id", we.stack_id, re.stack_id);
        c.eq("error", we.error, re.error);
        c.eq("live_bytes", we.live_bytes, re.live_bytes);
        c.eq("python_stack_id", we.python_stack_id, re.python_stack_id);
    }

    c.in<rec::CaptureBegin>();
    ASSERT_EQ(rep.captures.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::CaptureBegin& wc = i == 0 ? cb1 : cb2;
        const Capture& rc = rep.captures[i];
        c.eq("t", wc.t, rc.t_begin);
        c.eq("tid", wc.tid, rc.tid);
        c.eq("capture_id", wc.capture_id, rc.id);
        c.eq("stream", wc.stream, rc.stream);
        c.eq("mode", wc.mode, rc.mode);
        c.eq("graph", wc.graph, rc.target_graph);
    }
    c.in<rec::CaptureEnd>();
    for (const rec::CaptureEnd* we : {&ce1, &ce2}) {
        const Capture* rc = rep.find_capture(we->capture_id);
        ASSERT_NE(rc, nullptr);
        c.eq("t", std::optional<int64_t>(we->t), rc->t_end);
        c.eq("tid", we->tid, rc->end_tid);
        c.eq("capture_id", we->capture_id, rc->id);
        c.eq("error", we->error, rc->end_error);
        c.eq("graph", we->graph, rc->graph);
    }

    c.in<rec::Instantiate>();
    ASSERT_EQ(rep.execs.size(), 1u);
    const GraphExec& rg = rep.execs[0];
    c.eq("t", g.t, rg.t_instantiate);
    c.eq("tid", g.tid, rg.tid);
    c.eq("exec", g.exec, rg.exec);
    c.eq("graph", g.graph, rg.graph);
    c.eq("capture_id", g.capture_id, rg.capture_id);
    c.in<rec::Launch>();
    c.eq("exec", l.exec, rg.exec);
    EXPECT_EQ(rg.launches, 1u);
    c.not_kept("t");
    c.not_kept("tid");
    c.not_kept("stream");
    c.in<rec::ExecDestroy>();
    c.eq("t", std::optional<int64_t>(d.t), rg.t_destroy);
    c.eq("exec", d.exec, rg.exec);
    c.not_kept("tid");

    c.in<rec::GraphDestroy>();
    ASSERT_EQ(rep.graph_destroys.size(), 1u);
    c.eq("t", k.t, rep.graph_destroys[0].t);
    c.eq("tid", k.tid, rep.graph_destroys[0].tid);
    c.eq("graph", k.graph, rep.graph_destroys[0].graph);
    EXPECT_EQ(rep.graph_destroys[0].capture_id, 1u);  // the graph capture 1 ended with
    EXPECT_EQ(rep.find_capture(1)->t_graph_destroy, std::optional<int64_t>(k.t));

    c.in<rec::UnsafeCall>();
    ASSERT_EQ(rep.hazards.unsafe_calls.size(), 1u);
    const UnsafeCall& ru = rep.hazards.unsafe_calls[0];
    c.eq("t", wu.t, ru.t);
    c.eq("tid", wu.tid, ru.tid);
    c.eq("api", std::string(wu.api), ru.api);
    c.eq("capture_id", wu.capture_id, ru.capture_id);
    c.eq("capture_mode", wu.capture_mode, ru.capture_mode);
    c.eq("thread_mode", wu.thread_mode, ru.thread_mode);
    c.in<rec::FreeLiveGraph>();
    ASSERT_EQ(rep.hazards.frees_while_graph_alive.size(), 1u);
    const FreeWhileGraphAlive& rf = rep.hazards.frees_while_graph_alive[0];
    c.eq("t", wf.t, rf.t);
    c.eq("tid", wf.tid, rf.tid);
    c.eq("addr", wf.addr, rf.addr);
    c.eq("size", wf.size, rf.size);
    c.eq("capture_id", wf.capture_id, rf.capture_id);
    c.eq("exec", wf.exec, rf.exec);
    EXPECT_EQ(rf.block, std::optional<size_t>(0));  // a1, live at that address
    c.in<rec::WarmupRetention>();
    ASSERT_EQ(rep.hazards.warmup_retention.size(), 1u);
    const WarmupRetention& rw = rep.hazards.warmup_retention[0];
    c.eq("t", ww.t, rw.t);
    c.eq("tid", ww.tid, rw.tid);
    c.eq("capture_id", ww.capture_id, rw.capture_id);
    c.eq("phase", ww.phase, rw.phase);
    c.eq("since", ww.since, rw.since);
    c.eq("stack_id", ww.stack_id, rw.stack_id);
    c.eq("blocks", ww.blocks, rw.blocks);
    c.eq("bytes", ww.bytes, rw.bytes);

    c.in<rec::Compile>();
    ASSERT_EQ(rep.compiles.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::Compile& wx = i == 0 ? x1 : x2;
        c.eq("t", wx.t, rep.compiles[i].t);
        c.eq("tid", wx.tid, rep.compiles[i].tid);
        c.eq("compile_id", std::string(wx.compile_id), rep.compiles[i].id);
    }
    c.in<rec::Collection>();
    ASSERT_EQ(rep.collections.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        const rec::Collection& wy = i == 0 ? y1 : i == 1 ? y2 : y3;
        const Collection& ry = rep.collections[i];
        c.eq("t", wy.t, ry.t);
        c.eq("tid", wy.tid, ry.tid);
        c.eq("trigger", wy.trigger, ry.trigger);
        c.eq("generation", wy.generation, ry.generation);
        c.eq("duration_ns", wy.duration_ns, ry.duration_ns);
        c.eq("collected", wy.collected, ry.collected);
        c.eq("uncollectable", wy.uncollectable, ry.uncollectable);
        c.eq("cuda_bytes_freed", wy.cuda_bytes_freed, ry.cuda_bytes_freed);
        c.eq("compile_ids", wy.compile_ids ? std::string(*wy.compile_ids) : "<absent>",
             wy.compile_ids ? join(ry.compile_ids) : (ry.compile_ids.empty() ? "<absent>" : join(ry.compile_ids)));
        c.eq("mark_age_ns", wy.mark_age_ns, ry.mark_age_ns);
        c.eq("skipped", wy.skipped, ry.skipped);
        c.eq("explain", wy.explain,
             ry.explanation ? std::optional<uint32_t>(rep.explanations.at(*ry.explanation).id) : std::nullopt);
    }

    c.in<rec::Explanation>();
    ASSERT_EQ(rep.explanations.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::Explanation& wj = i == 0 ? ej : ej2;
        const Explanation& rj = rep.explanations[i];
        c.eq("t", wj.t, rj.t);
        c.eq("tid", wj.tid, rj.tid);
        c.eq("explain", wj.explain, rj.id);
        c.eq("objects", wj.objects, rj.objects);
        c.eq("tensors", wj.tensors, rj.tensors);
        c.eq("cuda_bytes", wj.cuda_bytes, rj.cuda_bytes);
        c.eq("analysis_ns", wj.analysis_ns, rj.analysis_ns);
        c.eq("complete", wj.complete, rj.complete);
    }
    EXPECT_EQ(rep.explanations[0].collection, std::optional<size_t>(2));  // y3 named it
    EXPECT_FALSE(rep.explanations[1].collection.has_value());
    const Explanation& rj = rep.explanations[0];
    c.in<rec::GarbageGroup>();
    ASSERT_EQ(rj.groups.size(), 2u);
    EXPECT_TRUE(rep.explanations[1].groups.empty());
    for (size_t i = 0; i < 2; ++i) {
        const rec::GarbageGroup& wu = i == 0 ? ug1 : ug2;
        c.eq("explain", wu.explain, rj.id);  // a u belongs to the explanation it names
        c.eq("kind", wu.kind, rj.groups[i].kind);
        c.eq("count", wu.count, rj.groups[i].count);
        c.eq("cuda_bytes", wu.cuda_bytes, rj.groups[i].cuda_bytes);
        c.eq("name", std::string(wu.name), rj.groups[i].name);
    }
    c.in<rec::GarbageTensor>();
    ASSERT_EQ(rj.storages.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::GarbageTensor& wg = i == 0 ? gt1 : gt2;
        const GarbageTensor& rg = rj.storages[i];
        c.eq("explain", wg.explain, rj.id);
        c.eq("device", wg.device, rg.device);
        c.eq("addr", wg.addr, rg.addr);
        c.eq("size", wg.size, rg.size);
        c.eq("how", wg.how, rg.how);
        c.eq("category", std::string(format::name_of(wg.category)), std::string(format::name_of(rg.category)));
        c.eq("holder", std::string(wg.holder.value_or("")), rg.holder);
    }
    // gt1's site: t1, live at its address; gt2's: none (no live block holds address 5).
    EXPECT_EQ(rj.storages[0].stack_id, t1.stack_id);
    EXPECT_EQ(rj.storages[0].python_stack_id, t1.python_stack_id);
    EXPECT_FALSE(rj.storages[0].site_is_segment);
    EXPECT_EQ(rj.storages[1].stack_id, 0u);
    EXPECT_FALSE(rj.storages[1].site_is_segment);
    c.in<rec::ChainStep>();
    ASSERT_EQ(rj.chains.size(), 1u);
    ASSERT_EQ(rj.chains.count(cs0.addr), 1u);
    const std::vector<ChainLink>& chain = rj.chains.at(cs0.addr);
    ASSERT_EQ(chain.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::ChainStep& wr = i == 0 ? cs0 : cs1;
        c.eq("explain", wr.explain, rj.id);
        c.eq("addr", wr.addr, cs0.addr);  // the chain's key
        c.eq("step", wr.step, static_cast<uint32_t>(i));
        c.eq("object", std::string(wr.object), chain[i].object);
        c.eq("edge", std::string(wr.edge.value_or("")), chain[i].edge);
    }

    c.in<rec::PhaseBegin>();
    ASSERT_EQ(rep.phases.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::PhaseBegin& wb = i == 0 ? b1 : b2;
        const Phase& rp = rep.phases[i];
        c.eq("t", wb.t, rp.t_begin);
        c.eq("tid", wb.tid, rp.tid);
        c.eq("phase_id", wb.phase_id, uint64_t{rp.id});
        c.eq("source", wb.source, rp.source);
        c.eq("name", std::string(wb.name), rp.name);
    }
    c.in<rec::PhaseEnd>();
    c.eq("t", std::optional<int64_t>(be.t), rep.phases[1].t_end);
    c.eq("tid", be.tid, rep.phases[1].end_tid);
    c.eq("phase_id", be.phase_id, uint64_t{rep.phases[1].id});
    EXPECT_FALSE(rep.phases[0].t_end.has_value());
    c.in<rec::Mark>();
    ASSERT_EQ(rep.marks.size(), 1u);
    c.eq("t", j.t, rep.marks[0].t);
    c.eq("tid", j.tid, rep.marks[0].tid);
    c.eq("source", j.source, rep.marks[0].source);
    c.eq("name", std::string(j.name), rep.marks[0].name);

    c.in<rec::Reserve>();
    ASSERT_EQ(rep.reservations.size(), 1u);
    const Reservation& rv = rep.reservations[0];
    c.eq("t", v1.t, rv.t_reserve);
    c.eq("tid", v1.tid, rv.tid);
    c.eq("va", v1.va, rv.va);
    c.eq("size", v1.size, rv.size);
    c.eq("stack_id", v1.stack_id, rv.stack_id);
    c.eq("python_stack_id", v1.python_stack_id, rv.python_stack_id);
    c.in<rec::AddressFree>();
    c.eq("t", std::optional<int64_t>(vf.t), rv.t_free);
    c.eq("va", vf.va, rv.va);
    c.not_kept("tid");
    c.not_kept("size");

    c.in<rec::Create>();
    ASSERT_EQ(rep.handles.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::Create& wn = i == 0 ? n1 : n2;
        const PhysicalHandle& rh = rep.handles[i];
        c.eq("t", wn.t, rh.t_create);
        c.eq("tid", wn.tid, rh.tid);
        c.eq("handle", wn.handle, rh.handle);
        c.eq("size", wn.size, rh.size);
        c.eq("device", wn.device, rh.device);
        c.eq("stack_id", wn.stack_id, rh.stack_id);
        c.eq("python_stack_id", wn.python_stack_id, rh.python_stack_id);
        c.eq("capture_id", wn.capture_id, rh.capture_id);
    }
    c.in<rec::Release>();
    c.eq("t", std::optional<int64_t>(nr.t), rep.handles[0].t_release);
    c.eq("handle", nr.handle, rep.handles[0].handle);
    c.not_kept("tid");
    c.in<rec::Map>();
    ASSERT_EQ(rep.mappings.size(), 1u);
    const Mapping& rq = rep.mappings[0];
    c.eq("t", q1.t, rq.t_map);
    c.eq("tid", q1.tid, rq.tid);
    c.eq("va", q1.va, rq.va);
    c.eq("size", q1.size, rq.size);
    c.eq("offset", q1.offset, rq.offset);
    c.eq("handle", q1.handle, rq.handle_value);
    EXPECT_EQ(rq.handle, std::optional<size_t>(1));  // n2's handle 0
    c.in<rec::Unmap>();
    c.eq("t", std::optional<int64_t>(uq.t), rq.t_unmap);
    c.eq("va", uq.va, rq.va);
    c.eq("size", true, uq.va + uq.size > rq.va);  // the range covers the mapping's start: it went
    EXPECT_EQ(rep.unmaps, 1u);
    c.not_kept("tid");
    c.in<rec::Import>();
    ASSERT_EQ(rep.imports.size(), 1u);
    const ImportedHandle& ri = rep.imports[0];
    c.eq("t", im.t, ri.t_import);
    c.eq("tid", im.tid, ri.tid);
    c.eq("handle", im.handle, ri.handle);
    c.eq("stack_id", im.stack_id, ri.stack_id);
    c.eq("python_stack_id", im.python_stack_id, ri.python_stack_id);

    c.in<rec::TensorAlloc>();
    ASSERT_EQ(rep.tensors.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::TensorAlloc& wt = i == 0 ? t1 : t2;
        const Tensor& rt = rep.tensors[i];
        c.eq("t", wt.t, rt.t_alloc);
        c.eq("tid", wt.tid, rt.tid);
        c.eq("addr", wt.addr, rt.addr);
        c.eq("size", wt.size, rt.size);
        c.eq("requested", wt.requested, rt.requested);
        c.eq("device", wt.device, rt.device);
        c.eq("stream", wt.stream, rt.stream);
        c.eq("stack_id", wt.stack_id, rt.stack_id);
        c.eq("python_stack_id", wt.python_stack_id, rt.python_stack_id);
        c.eq("capture_id", wt.capture_id, rt.capture_id);
        c.eq("pool", std::string(wt.pool), rt.pool);
    }
    c.in<rec::TensorFree>();
    c.eq("t", std::optional<int64_t>(tf.t), rep.tensors[0].t_free);
    c.eq("tid", tf.tid, rep.tensors[0].free_tid);
    c.eq("addr", tf.addr, rep.tensors[0].addr);
    c.eq("gc", tf.gc, rep.tensors[0].freed_in_gc);
    c.in<rec::TensorOom>();
    ASSERT_EQ(rep.tensor_ooms.size(), 1u);
    const TensorOom& ro = rep.tensor_ooms[0];
    c.eq("t", o.t, ro.t);
    c.eq("tid", o.tid, ro.tid);
    c.eq("device", o.device, ro.device);
    c.eq("requested", o.requested, ro.requested);
    c.eq("rounded", o.rounded, ro.rounded);
    c.eq("allocated", o.allocated, ro.allocated);
    c.eq("reserved", o.reserved, ro.reserved);
    c.eq("limit", o.limit, ro.limit);
    c.eq("stack_id", o.stack_id, ro.stack_id);
    c.eq("python_stack_id", o.python_stack_id, ro.python_stack_id);
    c.eq("rescued", std::string("gc"), ro.rescued);
    c.in<rec::TensorOomSite>();
    ASSERT_EQ(ro.sites.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::TensorOomSite& wo = i == 0 ? os1 : os2;
        c.eq("t", wo.t, ro.t);  // an o belongs to the O of its time
        c.eq("stack_id", wo.stack_id, ro.sites[i].stack_id);
        c.eq("python_stack_id", wo.python_stack_id, ro.sites[i].python_stack_id);
        c.eq("blocks", wo.blocks, ro.sites[i].blocks);
        c.eq("bytes", wo.bytes, ro.sites[i].bytes);
    }

    c.in<rec::Step>();
    ASSERT_EQ(rep.steps.size(), 1u);
    c.eq("t", st.t, rep.steps[0].t);
    c.eq("tid", st.tid, rep.steps[0].tid);
    c.eq("step", st.step, rep.steps[0].index);
    c.eq("source", std::string("api"), std::string(format::name_of(rep.steps[0].source)));
    c.eq("name", std::string(kOdd), rep.steps[0].name);
    c.in<rec::MomentBegin>();
    ASSERT_EQ(rep.moments.size(), 1u);
    const Moment& rm = rep.moments[0];
    c.eq("t", hb.t, rm.t);
    c.eq("tid", hb.tid, rm.tid);
    c.eq("moment", hb.moment, rm.id);
    c.eq("reason", std::string("oom"), std::string(format::name_of(rm.reason)));
    c.eq("step", hb.step, rm.step);
    c.in<rec::TensorTag>();
    ASSERT_EQ(rm.tags.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const rec::TensorTag& wg = i == 0 ? tg1 : tg2;
        c.eq("moment", wg.moment, rm.id);  // a g belongs to the moment it names
        c.eq("device", wg.device, rm.tags[i].device);
        c.eq("addr", wg.addr, rm.tags[i].addr);
        c.eq("size", wg.size, rm.tags[i].size);
        c.eq("category", std::string(format::name_of(wg.category)), std::string(format::name_of(rm.tags[i].category)));
        c.eq("label", std::string(wg.label.value_or("")), rm.tags[i].label);
    }
    c.in<rec::AllocatorBlock>();
    ASSERT_EQ(rm.blocks.size(), 1u);
    c.eq("moment", ab.moment, rm.id);
    c.eq("device", ab.device, rm.blocks[0].device);
    c.eq("addr", ab.addr, rm.blocks[0].addr);
    c.eq("size", ab.size, rm.blocks[0].size);
    c.eq("requested", ab.requested, rm.blocks[0].requested);
    c.eq("state", std::string("active_pending_free"), std::string(format::name_of(rm.blocks[0].state)));
    c.eq("segment", ab.segment, rm.blocks[0].segment);
    c.eq("pool", std::string(ab.pool), rm.blocks[0].pool);
    c.in<rec::OomContext>();
    ASSERT_EQ(rep.oom_contexts.size(), 1u);
    const OomContext& rx = rep.oom_contexts[0];
    c.eq("t", ox.t, rx.t);
    c.eq("tid", ox.tid, rx.tid);
    c.eq("device", ox.device, rx.device);
    c.eq("source", std::string("cuda"), std::string(format::name_of(rx.source)));
    c.eq("requested", ox.requested, rx.requested);
    c.eq("rounded", ox.rounded, rx.rounded);
    c.eq("limit", ox.limit, rx.limit);
    c.eq("device_free", ox.device_free, rx.device_free);
    c.eq("device_total", ox.device_total, rx.device_total);
    c.eq("allocated", ox.allocated, rx.allocated);
    c.eq("reserved", ox.reserved, rx.reserved);
    c.eq("stack_id", ox.stack_id, rx.stack_id);
    c.eq("python_stack_id", ox.python_stack_id, rx.python_stack_id);
    c.eq("moment", size_t{0}, rx.moment.value_or(99));
    c.eq("compile_pending", ox.compile_pending, rx.compile_pending);
    c.eq("capturing", ox.capturing, rx.capturing);
    c.in<rec::MomentEnd>();
    c.eq("t", ke.t, rm.t_end);
    c.eq("moment", ke.moment, rm.id);
    c.eq("tensors", ke.tensors, uint64_t{rm.tags.size()});
    c.eq("blocks", ke.blocks, uint64_t{rm.blocks.size()});
    c.eq("complete", ke.complete, rm.complete);

    c.in<rec::Lost>();
    c.eq("t", u.t, rep.lost_last_t);
    c.eq("first_t", u.first_t, rep.lost_first_t);
    c.eq("count", u.count, rep.lost_records);
    c.in<rec::PythonPath>();
    ASSERT_EQ(rep.python_paths.size(), 2u);  // the repeated path is kept once
    c.eq("kind", std::string("inductor_cache"), std::string(format::name_of(rep.python_paths[0].kind)));
    c.eq("path", std::string(kOdd), rep.python_paths[0].path);
    c.eq("kind", std::string("torch"), std::string(format::name_of(rep.python_paths[1].kind)));
    c.eq("path", std::string(ip2.path), rep.python_paths[1].path);
    c.in<rec::End>();
    c.eq("t", z.t, rep.end_t);
    EXPECT_TRUE(rep.complete);

    // A second file: a run without its end record ends at its last heartbeat, and a block freed
    // for good keeps its F's api.
    Writer w2(GetParam());
    const rec::Alloc a3{0, 1, 0x1000, 1, format::Kind::Device, "cudaMalloc", 0, std::nullopt, 0, 0, 0};
    const rec::Free f3{1, 1, 0x1000, 1, "cuMemFreeAsync", uint64_t{7}};
    const rec::Heartbeat h{kMaxT};
    w2.add(a3), w2.add(f3), w2.add(h);
    const Report rep2 = w2.load();
    c.in<rec::Free>();
    c.eq("api", std::string(f3.api), rep2.blocks.at(0).free_api);
    c.in<rec::Heartbeat>();
    c.eq("t", h.t, rep2.end_t);
    EXPECT_FALSE(rep2.complete);
    ASSERT_FALSE(rep2.warnings.empty());
    EXPECT_NE(rep2.warnings[0].find("(last flush)"), std::string::npos) << rep2.warnings[0];

    // A third file: a bounded report (minor 10), its spine and the one detail part left of two.
    // Part 1 (records 0 and 1, up to t=3) was deleted; part 2 starts at record 2 with the one
    // block live then (carried) and frees it.
    Writer spine(GetParam()), part(GetParam(), true);
    const rec::Info limit{"report_limit", "1048576"};
    const rec::DetailDropped dropped{5, 1, 0, 2, 3, true};  // folded, but its fold is not there
    const rec::DetailAt at{3, 0}, leading{2, 1};
    const rec::Alloc carried{1, 1, 0x2000, 64, format::Kind::Device, "cudaMalloc", 0, std::nullopt, 0, 0, 0};
    const rec::Free freed{4, 1, 0x2000, 64, "cudaFree", std::nullopt};
    spine.add(limit), spine.add(dropped), spine.add(at), spine.add(rec::End{6});
    part.add(leading), part.add(carried), part.add(freed);
    char dir[] = "/tmp/memguard_roundtrip_bounded_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string spine_path = std::string(dir) + "/r.mgr", part_path = spine_path + ".part-000002";
    for (const auto& [path, bytes] : {std::pair{spine_path, spine.text()}, std::pair{part_path, part.text()}}) {
        FILE* f = std::fopen(path.c_str(), "wb");
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
        std::fclose(f);
    }
    const Report rep3 = load_report(spine_path);
    std::remove(part_path.c_str()), std::remove(spine_path.c_str()), rmdir(dir);
    EXPECT_TRUE(rep3.bounded);
    ASSERT_EQ(rep3.blocks.size(), 1u);  // the carried block, taken as live after the gap, then freed
    EXPECT_EQ(rep3.blocks[0].t_alloc, carried.t);
    EXPECT_EQ(rep3.blocks[0].t_free, std::optional<int64_t>(freed.t));
    EXPECT_EQ(rep3.events.size(), 2u);
    ASSERT_FALSE(rep3.warnings.empty());
    EXPECT_NE(rep3.warnings[0].find("detail dropped"), std::string::npos) << rep3.warnings[0];
    c.in<rec::DetailDropped>();
    c.eq("until", dropped.until, rep3.detail_dropped_until);
    c.eq("end", dropped.end, dropped.first + rep3.detail_dropped);
    c.not_kept("t"), c.not_kept("part"), c.not_kept("first");  // the warning names the parts and records
    c.eq("folded", dropped.folded, rep3.detail_fold_missing == 1);  // counted as dropped: no fold covers it
    EXPECT_NE(rep3.warnings[0].find("no fold beside the report covers them"), std::string::npos) << rep3.warnings[0];
    c.in<rec::DetailAt>();
    c.not_kept("position"), c.not_kept("carried");  // where the spine and the part meet: read, not kept

    // A fold file (report/fold.h): its a record, a figure, and figures that own an A and a T copy.
    FoldPoint point;
    point.magic = "MEMGUARD-REPORT 1";
    point.part = 3, point.position = 40, point.events = 45, point.blocks = 21, point.tensors = 7, point.t = 9000;
    point.dropped = 10, point.dropped_until = 4000, point.dropped_parts = 1;
    const std::vector<std::pair<uint64_t, int64_t>> extra{{5, 1}, {40, -2}};
    point.extra_events = &extra;
    point.run = {4242, 1700000000123456789};
    const std::vector<size_t> carried_blocks{3, SIZE_MAX}, carried_tensors{7};
    point.carried_blocks = &carried_blocks;
    point.carried_tensors = &carried_tensors;
    FoldWriter fw(point);
    fw.figure("summary.kind", {-3, 0, INT64_MAX});
    Block fb;
    fb.t_alloc = 77, fb.tid = 3, fb.addr = 0x5000, fb.size = 512, fb.kind = format::Kind::Managed;
    fb.api = "cudaMallocManaged", fb.device = 1, fb.stream = 9, fb.stack_id = 2, fb.capture_id = 4;
    fb.python_stack_id = 6;
    fw.block("peak.gpu.block", fb, {12});
    Tensor ft;
    ft.t_alloc = 88, ft.tid = 4, ft.addr = 0x6000, ft.size = 1024, ft.requested = 1000, ft.device = 0;
    ft.stream = 5, ft.stack_id = 2, ft.python_stack_id = 6, ft.capture_id = 4, ft.pool = "1.2";
    fw.tensor("peak.tensor.tensor", ft, {3});
    char fold_dir[] = "/tmp/memguard_roundtrip_fold_XXXXXX";
    ASSERT_NE(mkdtemp(fold_dir), nullptr);
    const std::string fold_spine = std::string(fold_dir) + "/r.mgr";
    write_fold(fold_spine, point.part, fw.text());
    std::string fold_error;
    const std::optional<Fold> fold = read_fold(fold_path(fold_spine, point.part), point.magic, fold_error);
    std::remove(fold_path(fold_spine, point.part).c_str()), rmdir(fold_dir);
    ASSERT_TRUE(fold) << fold_error;
    c.in<rec::FoldAt>();
    c.eq("part", point.part, fold->at.part);
    c.eq("position", point.position, fold->at.position);
    c.eq("events", point.events, fold->at.events);
    c.eq("blocks", point.blocks, fold->at.blocks);
    c.eq("tensors", point.tensors, fold->at.tensors);
    c.eq("t", point.t, fold->at.t);
    c.eq("dropped", point.dropped, fold->at.dropped);
    c.eq("dropped_until", point.dropped_until, fold->at.dropped_until);
    c.eq("dropped_parts", point.dropped_parts, fold->at.dropped_parts);
    EXPECT_EQ(fold->extra, extra);
    EXPECT_EQ(fold->at.run, point.run);
    EXPECT_EQ(fold->carried_blocks, carried_blocks);
    EXPECT_EQ(fold->carried_tensors, carried_tensors);
    c.in<rec::Figure>();
    ASSERT_EQ(fold->figures.size(), 3u);
    c.eq("name", std::string("summary.kind"), fold->figures[0].name);
    c.eq("value", (std::vector<int64_t>{-3, 0, INT64_MAX}), fold->figures[0].values);
    c.eq("copies", true, fold->figures[1].block.has_value() && !fold->figures[0].block && !fold->figures[0].tensor);
    ASSERT_TRUE(fold->figures[1].block && fold->figures[2].tensor);
    const Block& rb = *fold->figures[1].block;
    EXPECT_TRUE(rb.t_alloc == fb.t_alloc && rb.tid == fb.tid && rb.addr == fb.addr && rb.size == fb.size &&
                rb.kind == fb.kind && rb.api == fb.api && rb.device == fb.device && rb.stream == fb.stream &&
                rb.stack_id == fb.stack_id && rb.capture_id == fb.capture_id &&
                rb.python_stack_id == fb.python_stack_id);
    const Tensor& rt = *fold->figures[2].tensor;
    EXPECT_TRUE(rt.t_alloc == ft.t_alloc && rt.tid == ft.tid && rt.addr == ft.addr && rt.size == ft.size &&
                rt.requested == ft.requested && rt.device == ft.device && rt.stream == ft.stream &&
                rt.stack_id == ft.stack_id && rt.python_stack_id == ft.python_stack_id &&
                rt.capture_id == ft.capture_id && rt.pool == ft.pool);
    EXPECT_EQ(fold->figures[1].values, std::vector<int64_t>{12});

    // Every record of the table was written, and every field of each was compared (or is one the
    // reader checks and drops, named above). A field added to the table fails here until compared.
    std::set<std::string> written = w.written();
    written.insert(record_name<rec::FoldAt>()), written.insert(record_name<rec::Figure>());
    written.insert(w2.written().begin(), w2.written().end());
    written.insert(spine.written().begin(), spine.written().end());
    for (const format::RecordInfo& r : format::describe_table()) {
        const std::string name = record_name(r.letter, r.key);
        EXPECT_EQ(written.count(name), 1u) << "record " << name << " is not written by the round trip";
        std::set<std::string> fields;
        for (const format::FieldInfo& f : r.fields) {
            if (!f.key) fields.insert(std::string(f.name));
        }
        auto seen = c.seen().find(name);
        EXPECT_EQ(seen == c.seen().end() ? std::set<std::string>() : seen->second, fields)
            << "record " << name << ": the fields compared are not the table's";
    }
}

}  // namespace
}  // namespace memguard::report

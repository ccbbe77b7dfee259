// The binary encoding of the report (docs/report-format.md, "Binary encoding"): the writer's side.
// A record is a frame: its letter, the payload's length (a LEB128 varint) and the payload, its
// fields as the record table lists them (format/records.h) in LEB128 varints, zigzag for signed
// values, strings length-prefixed. Plain records (every record but A, F, T and t) are coded on
// their own; the predicted records (kPredicted: those written on every allocation and free) are
// coded against what the file said before (Predictions): a mask of the fields that differ from
// their prediction, then only those, times and addresses as differences. Version 2 (issue 23)
// adds rules (Rules): a free names its block by rank among the live ones, an allocation its
// address by rank among the blocks of its size freed last, sizes follow the allocation's site and
// stacks the stack that followed last time. Header-only: the library's writer thread encodes with
// it, the reader decodes with format/binary_decode.h; the rules are one implementation for both.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "format/records.h"

namespace memguard::format {

/// The binary report's first line; records follow it as frames.
inline constexpr std::string_view kBinaryMagic = "MEMGUARD-REPORT-BINARY";

/// Appends `v` as a LEB128 varint (at most 10 bytes). Returns the number of bytes written.
inline size_t put_varint(char* out, uint64_t v) noexcept {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
        v >>= 7;
    }
    out[n++] = static_cast<char>(v);
    return n;
}

constexpr uint64_t zigzag(int64_t v) noexcept {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
constexpr int64_t unzigzag(uint64_t v) noexcept { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

/// True for the records coded against their predictions (A, F, T and t).
template <class R, class = void>
struct IsPredicted : std::false_type {};
template <class R>
struct IsPredicted<R, std::void_t<decltype(R::kPredicted)>> : std::bool_constant<R::kPredicted> {};
template <class R>
constexpr bool is_predicted() {
    return IsPredicted<R>::value;
}

namespace binary {

/// The binary encodings, the header line's number (`MEMGUARD-REPORT-BINARY 2`): 1 codes every
/// field of a predicted record against the last value of its slot; 2 (issue 23) adds the rules
/// (Rules). Both carry the records of report format major 1. The writer writes kVersion.
inline constexpr int kVersion1 = 1;
inline constexpr int kVersion = 2;

/// The most fields a predicted record may have (the mask's bits).
constexpr size_t kMaxPredictedFields = 16;

/// The fields whose prediction is shared by every predicted record: the last value of a field of
/// that name in any of them. Others are predicted from the same field of the previous record of
/// the same letter. t and addr are coded as differences from their predictions.
constexpr std::string_view kSharedNames[] = {"t", "tid", "addr", "size"};
constexpr int kShared = 4;

struct Namer {
    std::array<int8_t, kMaxPredictedFields> map{};
    size_t i = 0;
    template <class T>
    constexpr void operator()(const Field& f, const T&) {
        int8_t slot = static_cast<int8_t>(i);
        for (int k = 0; k < kShared; ++k) {
            if (kSharedNames[k] == std::string_view(f.name)) slot = static_cast<int8_t>(-1 - k);
        }
        if (i < kMaxPredictedFields) map[i] = slot;
        ++i;
    }
    constexpr void key(const Field&, std::string_view) { ++i; }
};

/// Where field i of predicted record R finds its prediction: -1 - k for the shared slot k, else i.
template <class R>
constexpr std::array<int8_t, kMaxPredictedFields> slot_map() {
    Namer n;
    R r{};
    R::fields(n, r);
    return n.map;
}

/// The number of fields of record R.
template <class R>
constexpr size_t field_count() {
    Namer n;
    R r{};
    R::fields(n, r);
    return n.i;
}

struct Finder {
    std::string_view name;
    int i = 0, found = -1;
    template <class T>
    constexpr void operator()(const Field& f, const T&) {
        if (name == std::string_view(f.name)) found = i;
        ++i;
    }
    constexpr void key(const Field&, std::string_view) { ++i; }
};

/// The index of record R's field `name`, or -1.
template <class R>
constexpr int field_index(std::string_view name) {
    Finder f{name};
    R r{};
    R::fields(f, r);
    return f.found;
}

/// Record R's field of index `want` (a copy of its Field, for a message).
struct FieldAt {
    int want, i = 0;
    Field out{"", "", Enc::Dec};
    template <class T>
    constexpr void operator()(const Field& f, const T&) {
        if (i++ == want) out = f;
    }
    constexpr void key(const Field&, std::string_view) { ++i; }
};

/// The index of predicted record R among the table's predicted records.
template <class R>
constexpr int predicted_index() {
    int i = 0, found = -1;
    for_each_record([&](auto type) {
        using T = typename decltype(type)::type;
        if constexpr (is_predicted<T>()) {
            if (std::is_same_v<T, R>) found = i;
            ++i;
        }
    });
    return found;
}
constexpr int predicted_count() {
    int n = 0;
    for_each_record([&](auto type) { n += is_predicted<typename decltype(type)::type>() ? 1 : 0; });
    return n;
}

/// A field's prediction: a number (its bits), whether an optional is present, a string.
struct Slot {
    uint64_t bits = 0;
    bool present = false;  // an optional's
    bool known = false;    // false until a record codes the field: the first value is always coded
    std::string str;
};

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // Fibonacci hashing's multiplier

/// Version 2: the blocks of a family (A and F, or T and t) whose allocation the file holds and
/// whose free it does not yet, the last kWindow of them, in allocation order. A free names its
/// block by rank: 0 is the newest.
class LiveWindow {
public:
    static constexpr size_t kWindow = 256;
    struct Entry {
        uint64_t addr = 0, size = 0;
    };
    size_t size() const noexcept { return end_ - begin_; }
    /// The block of rank r (< size()).
    const Entry& at(size_t r) const noexcept { return e_[end_ - 1 - r]; }
    /// An allocation: the oldest block goes when the window is full.
    void push(uint64_t addr, uint64_t bytes) noexcept {
        if (size() == kWindow) {
            --filter_[bucket(e_[begin_].addr)];
            ++begin_;
        }
        if (end_ == e_.size()) {
            std::copy(e_.begin() + static_cast<long>(begin_), e_.end(), e_.begin());
            end_ -= begin_;
            begin_ = 0;
        }
        e_[end_++] = Entry{addr, bytes};
        ++filter_[bucket(addr)];
    }
    /// The rank of the newest block at `addr`, or -1 (the writer's question).
    long find(uint64_t addr) const noexcept {
        if (filter_[bucket(addr)] == 0) return -1;
        for (size_t i = end_; i > begin_; --i) {
            if (e_[i - 1].addr == addr) return static_cast<long>(end_ - i);
        }
        return -1;
    }
    /// Removes the block of rank r (< size()).
    void take(size_t r) noexcept {
        const size_t at = end_ - 1 - r;
        --filter_[bucket(e_[at].addr)];
        std::copy(e_.begin() + static_cast<long>(at) + 1, e_.begin() + static_cast<long>(end_),
                  e_.begin() + static_cast<long>(at));
        --end_;
    }

private:
    // How many blocks of the window hash to a bucket: find() skips the scan for an address that
    // is not there (a free of a block older than the window).
    static size_t bucket(uint64_t addr) noexcept { return static_cast<size_t>((addr * kGolden) >> 54); }
    std::array<Entry, 2 * kWindow> e_{};
    size_t begin_ = 0, end_ = 0;
    std::array<uint16_t, 1024> filter_{};
};

/// Version 2: blocks freed by rank, by size: row `index(size)` holds the addresses of the last
/// kWays such blocks of one size, newest first (a block of another size that hashes to the row
/// empties it first). An allocation names its address by rank in the row of its size.
class FreedRows {
public:
    static constexpr size_t kRows = 256, kWays = 32;  // kWays: a power of two (a ring)
    /// A ring: the address of rank k is addr[(head + k) % kWays].
    struct Row {
        uint64_t size = 0;
        uint32_t n = 0, head = 0;
        std::array<uint64_t, kWays> addr{};
        uint64_t at(size_t k) const noexcept { return addr[(head + k) & (kWays - 1)]; }
    };
    static size_t index(uint64_t size) noexcept { return static_cast<size_t>((size * kGolden) >> 56); }
    /// The row of blocks of `size`, or null when it has none.
    const Row* row(uint64_t size) const noexcept {
        const Row& r = rows_[index(size)];
        return r.n > 0 && r.size == size ? &r : nullptr;
    }
    static long find(const Row& r, uint64_t addr) noexcept {
        for (uint32_t k = 0; k < r.n; ++k) {
            if (r.at(k) == addr) return static_cast<long>(k);
        }
        return -1;
    }
    /// Removes the address of rank `rank` from the row of `size` (which has it): the newer ones
    /// move up a rank's place.
    void take(uint64_t size, size_t rank) noexcept {
        Row& r = rows_[index(size)];
        for (size_t k = rank; k > 0; --k) r.addr[(r.head + k) & (kWays - 1)] = r.at(k - 1);
        r.head = (r.head + 1) & (kWays - 1);
        --r.n;
    }
    void push(uint64_t addr, uint64_t size) noexcept {
        Row& r = rows_[index(size)];
        if (r.size != size) {
            r.size = size;
            r.n = 0;
        }
        r.head = (r.head - 1) & (kWays - 1);  // full: over the oldest
        r.addr[r.head] = addr;
        if (r.n < kWays) ++r.n;
    }

private:
    std::unique_ptr<Row[]> rows_ = std::make_unique<Row[]>(kRows);
};

/// Version 2: what a family's allocations did last at their sites: the stack that followed a
/// stack, the size allocated at a (stack_id, python_stack_id).
struct Sites {
    static constexpr size_t kSize = 1024;
    struct Next {
        uint32_t from = 0, to = 0;
        bool known = false;
    };
    struct Size {
        uint32_t stack = 0, python = 0;
        uint64_t size = 0;
        bool known = false;
    };
    static size_t of(uint32_t stack) noexcept { return static_cast<size_t>((stack * kGolden) >> 54); }
    static size_t of(uint32_t stack, uint32_t python) noexcept {
        return static_cast<size_t>(((stack * kGolden) ^ (python * 0xC2B2AE3D27D4EB4Full)) >> 54);
    }
    std::array<Next, kSize> next{};
    std::array<Size, kSize> sizes{};
};

/// Version 2's state of a family of records (A/F, T/t).
struct Family {
    LiveWindow live;
    FreedRows freed;
    Sites sites;
};

template <class R>
constexpr bool is_alloc() {
    return R::kLetter == 'A' || R::kLetter == 'T';
}
template <class R>
constexpr bool is_free() {
    return R::kLetter == 'F' || R::kLetter == 't';
}

/// The predictions both sides keep, in file order: initially none (each slot's first value is
/// coded). A default-constructed one is the start of a file of the version the writer writes.
class Predictions {
public:
    /// Room for the strings the writer predicts (an api's name, a pool's "first.second"): coding
    /// one allocates nothing, so an encoding cannot fail halfway through its predictions.
    static constexpr size_t kStringRoom = 64;
    explicit Predictions(int version = kVersion) : version_(version) {
        for (Slot& s : shared_) s.str.reserve(kStringRoom);
        for (auto& letter : own_) {
            for (Slot& s : letter) s.str.reserve(kStringRoom);
        }
        if (version_ >= 2) families_ = std::make_unique<Family[]>(2);
    }
    int version() const noexcept { return version_; }
    template <class R>
    Slot& slot(size_t i) {
        static constexpr auto kMap = slot_map<R>();
        const int s = kMap[i];
        return s < 0 ? shared_[static_cast<size_t>(-1 - s)] : own_[predicted_index<R>()][static_cast<size_t>(s)];
    }
    template <class R>
    static constexpr bool is_delta(size_t i) {
        constexpr auto kMap = slot_map<R>();
        return kMap[i] == -1 || kMap[i] == -3;  // t, addr
    }
    /// Version 2: the state of R's family (blocks: A and F; tensors: T and t).
    template <class R>
    Family& family() {
        return families_[R::kLetter == 'A' || R::kLetter == 'F' ? 0 : 1];
    }
    /// The start of a file of the same version.
    void reset() { *this = Predictions(version_); }

private:
    int version_;
    std::array<Slot, kShared> shared_{};
    std::array<std::array<Slot, kMaxPredictedFields>, predicted_count()> own_{};
    std::unique_ptr<Family[]> families_;  // version 2: blocks, tensors
};

template <class T>
constexpr uint64_t bits_of(T v) noexcept {
    if constexpr (std::is_enum_v<T>) {
        return static_cast<uint64_t>(static_cast<std::underlying_type_t<T>>(v));
    } else {
        return static_cast<uint64_t>(v);
    }
}

/// Version 2: how a predicted record's rule fields are coded. Mask bit 0 says a rank follows the
/// mask; field i's bit is i + 1.
struct Coded {
    bool has_rank = false;
    uint64_t rank = 0;                                // the varint after the mask (bit 0)
    uint32_t fields = 0;                              // bit i: rule field i is in the payload
    std::array<uint64_t, kMaxPredictedFields> value;  // its coded value (only those: not initialized)
    // Set by the rules: where the record's block was found (-1: not by rank).
    long live_rank = -1, freed_rank = -1;
    bool coded(size_t i) const noexcept { return ((fields >> i) & 1) != 0; }
    void code(size_t i, uint64_t v) noexcept {
        fields |= uint32_t{1} << i;
        value[i] = v;
    }
};

/// What a payload asked for that the predictions cannot give (the reader's error).
enum class RuleError { None, NoPrediction, NoLiveBlock, NoFreedBlock };

/// Version 2's rules (docs/report-format.md, "Binary encoding"), for predicted record R: which of
/// its fields they predict, and the predictions. plan() (the writer) and resolve() (the reader)
/// are each other's inverse over the same predict functions; commit() is both sides' update.
///
/// An allocation (A, T): stack_id is the stack that followed the previous allocation's stack the
/// last time that one was seen (else that stack); size the last size allocated at (stack_id,
/// python_stack_id) (else the shared size); requested (T) the size; addr the address of rank
/// `rank` (bit 0's varint, else 0) among the blocks of that size freed last, or, when addr's bit
/// is set, the zigzag difference from the newest of them (else the shared addr).
/// A free (F, t): addr the live block of rank `rank` (0: the newest allocation), or, when addr's
/// bit is set, the zigzag difference from the shared addr (a block not among the last 256);
/// size (F) the block's size.
template <class R>
struct Rules {
    static constexpr int kAddr = field_index<R>("addr"), kSize = field_index<R>("size"),
                         kRequested = field_index<R>("requested"), kStack = field_index<R>("stack_id"),
                         kPython = field_index<R>("python_stack_id");
    static constexpr int kAddrShared = 2, kSizeShared = 3;  // kSharedNames

    static constexpr uint32_t bit(int f) { return f >= 0 ? uint32_t{1} << f : 0; }
    /// Bit i: field i has a rule.
    static constexpr uint32_t kRuleMask = is_alloc<R>()  ? bit(kAddr) | bit(kSize) | bit(kRequested) | bit(kStack)
                                          : is_free<R>() ? bit(kAddr) | bit(kSize)
                                                         : 0;
    static constexpr bool is_rule(size_t i) { return ((kRuleMask >> i) & 1) != 0; }

    static Slot& shared_addr(Predictions& p) { return p.slot<R>(kAddr); }

    /// An allocation's stack: the one that followed the previous allocation's stack.
    static bool predict_stack(Predictions& p, uint32_t* out) {
        const Slot& prev = p.slot<R>(kStack);
        if (!prev.known) return false;
        const auto from = static_cast<uint32_t>(prev.bits);
        const Sites::Next& n = p.family<R>().sites.next[Sites::of(from)];
        *out = n.known && n.from == from ? n.to : from;
        return true;
    }
    static bool predict_size(Predictions& p, uint32_t stack, uint32_t python, uint64_t* out) {
        const Sites::Size& s = p.family<R>().sites.sizes[Sites::of(stack, python)];
        if (s.known && s.stack == stack && s.python == python) {
            *out = s.size;
            return true;
        }
        const Slot& shared = p.slot<R>(kSize);
        *out = shared.bits;
        return shared.known;
    }
    static uint32_t python_of(const R& r) {
        if constexpr (kPython >= 0) {
            return r.python_stack_id;
        } else {
            return 0;
        }
    }

    /// The writer: how r's rule fields are coded, in `c`.
    static void plan(Predictions& p, const R& r, Coded& c) {
        Family& fam = p.family<R>();
        if constexpr (is_alloc<R>()) {
            uint32_t stack = 0;
            if (!predict_stack(p, &stack) || stack != r.stack_id) c.code(kStack, r.stack_id);
            uint64_t size = 0;
            if (!predict_size(p, r.stack_id, python_of(r), &size) || size != r.size) c.code(kSize, r.size);
            if constexpr (kRequested >= 0) {
                if (r.requested != r.size) c.code(kRequested, r.requested);
            }
            const FreedRows::Row* row = fam.freed.row(r.size);
            c.freed_rank = row != nullptr ? FreedRows::find(*row, r.addr) : -1;
            if (c.freed_rank < 0) {
                const uint64_t base = row != nullptr ? row->at(0) : shared_addr(p).bits;
                c.code(kAddr, zigzag(static_cast<int64_t>(r.addr - base)));
            } else if (c.freed_rank > 0) {
                c.has_rank = true;
                c.rank = static_cast<uint64_t>(c.freed_rank);
            }
        } else {
            c.live_rank = fam.live.find(r.addr);
            if (c.live_rank < 0) {
                c.code(kAddr, zigzag(static_cast<int64_t>(r.addr - shared_addr(p).bits)));
            } else if (c.live_rank > 0) {
                c.has_rank = true;
                c.rank = static_cast<uint64_t>(c.live_rank);
            }
            if constexpr (kSize >= 0) {
                const Slot& shared = p.slot<R>(kSize);
                const bool known = c.live_rank >= 0 || shared.known;
                const uint64_t size = c.live_rank >= 0 ? fam.live.at(static_cast<size_t>(c.live_rank)).size
                                                       : shared.bits;
                if (!known || size != r.size) c.code(kSize, r.size);
            }
        }
    }

    /// The reader: r's rule fields from `c` (r's other fields are read). RuleError::None, or why not.
    static RuleError resolve(Predictions& p, R& r, Coded& c, int* field) {
        Family& fam = p.family<R>();
        if constexpr (is_alloc<R>()) {
            *field = kStack;
            if (c.coded(kStack)) {
                r.stack_id = static_cast<uint32_t>(c.value[kStack]);
            } else if (!predict_stack(p, &r.stack_id)) {
                return RuleError::NoPrediction;
            }
            *field = kSize;
            if (c.coded(kSize)) {
                r.size = c.value[kSize];
            } else if (!predict_size(p, r.stack_id, python_of(r), &r.size)) {
                return RuleError::NoPrediction;
            }
            if constexpr (kRequested >= 0) r.requested = c.coded(kRequested) ? c.value[kRequested] : r.size;
            *field = kAddr;
            const FreedRows::Row* row = fam.freed.row(r.size);
            if (c.coded(kAddr)) {
                const uint64_t base = row != nullptr ? row->at(0) : shared_addr(p).bits;
                r.addr = base + static_cast<uint64_t>(unzigzag(c.value[kAddr]));
                c.freed_rank = -1;
            } else {
                if (row == nullptr || c.rank >= row->n) return RuleError::NoFreedBlock;
                c.freed_rank = static_cast<long>(c.rank);
                r.addr = row->at(c.rank);
            }
        } else {
            *field = kAddr;
            if (c.coded(kAddr)) {
                r.addr = shared_addr(p).bits + static_cast<uint64_t>(unzigzag(c.value[kAddr]));
                c.live_rank = -1;
            } else {
                if (c.rank >= fam.live.size()) return RuleError::NoLiveBlock;
                c.live_rank = static_cast<long>(c.rank);
                r.addr = fam.live.at(c.rank).addr;
            }
            if constexpr (kSize >= 0) {
                *field = kSize;
                const Slot& shared = p.slot<R>(kSize);
                if (c.coded(kSize)) {
                    r.size = c.value[kSize];
                } else if (c.live_rank >= 0) {
                    r.size = fam.live.at(static_cast<size_t>(c.live_rank)).size;
                } else if (shared.known) {
                    r.size = shared.bits;
                } else {
                    return RuleError::NoPrediction;
                }
            }
        }
        return RuleError::None;
    }

    /// Both sides, after record r (its fields all known, `c` as plan or resolve left it).
    static void commit(Predictions& p, const R& r, const Coded& c) {
        Family& fam = p.family<R>();
        if constexpr (is_alloc<R>()) {
            if (c.freed_rank >= 0) fam.freed.take(r.size, static_cast<size_t>(c.freed_rank));
            fam.live.push(r.addr, r.size);
            Slot& prev = p.slot<R>(kStack);
            if (prev.known) {
                const auto from = static_cast<uint32_t>(prev.bits);
                fam.sites.next[Sites::of(from)] = Sites::Next{from, r.stack_id, true};
            }
            prev.bits = r.stack_id;
            prev.known = true;
            fam.sites.sizes[Sites::of(r.stack_id, python_of(r))] = Sites::Size{r.stack_id, python_of(r), r.size, true};
        } else if (c.live_rank >= 0) {
            fam.freed.push(r.addr, fam.live.at(static_cast<size_t>(c.live_rank)).size);
            fam.live.take(static_cast<size_t>(c.live_rank));
        }
        Slot& addr = shared_addr(p);
        addr.bits = r.addr;
        addr.known = true;
        if constexpr (kSize >= 0) {
            Slot& size = p.slot<R>(kSize);
            size.bits = r.size;
            size.known = true;
        }
    }
};

}  // namespace binary

/// A binary frame, built in a fixed buffer: the payload goes after room for its header, which
/// finish() writes just before it. Fields that do not fit are cut, as in a text Line.
class Frame {
public:
    static constexpr size_t kCapacity = 8192;
    static constexpr size_t kHead = 3;  // the letter and a varint of at most 2 bytes (< 2^14)

    void begin(char type) noexcept {
        type_ = type;
        len_ = kHead;
    }
    bool room(size_t n) const noexcept { return len_ + n <= kCapacity; }
    size_t size() const noexcept { return len_ - kHead; }
    void varint(uint64_t v) noexcept {
        if (room(10)) len_ += put_varint(buf_ + len_, v);
    }
    void svarint(int64_t v) noexcept { varint(zigzag(v)); }
    void raw(char c) noexcept {
        if (room(1)) buf_[len_++] = c;
    }
    /// A length-prefixed string, cut to what fits.
    void bytes(std::string_view s) noexcept {
        if (!room(3)) return;
        size_t n = s.size() < kCapacity - len_ - 3 ? s.size() : kCapacity - len_ - 3;
        len_ += put_varint(buf_ + len_, n);
        for (size_t i = 0; i < n; ++i) buf_[len_++] = s[i];
    }
    /// How many more items of at most 10 bytes fit, after their count.
    size_t items_that_fit(size_t n) const noexcept {
        const size_t fit = len_ + 2 + 10 < kCapacity ? (kCapacity - len_ - 12) / 10 : 0;
        return n < fit ? n : fit;
    }
    std::string_view finish() noexcept {
        const size_t payload = len_ - kHead;
        char head[kHead];
        const size_t n = put_varint(head + 1, payload) + 1;
        head[0] = type_;
        char* start = buf_ + kHead - n;
        for (size_t i = 0; i < n; ++i) start[i] = head[i];
        return {start, n + payload};
    }

private:
    char buf_[kCapacity];
    size_t len_ = kHead;
    char type_ = 0;
};

/// The plain encoder: each field as the table lists it, on its own.
class PlainEncoder {
public:
    explicit PlainEncoder(Frame& frame) noexcept : f_(frame) {}

    void operator()(const Field&, int64_t v) noexcept { f_.svarint(v); }
    void operator()(const Field&, int v) noexcept { f_.svarint(v); }
    void operator()(const Field&, uint64_t v) noexcept { f_.varint(v); }
    void operator()(const Field&, uint32_t v) noexcept { f_.varint(v); }
    void operator()(const Field&, bool v) noexcept { f_.varint(v ? 1 : 0); }
    void operator()(const Field&, std::string_view v) noexcept { f_.bytes(v); }
    template <class E, class = decltype(name_of(E{}))>
    void operator()(const Field&, E v) noexcept {
        f_.varint(binary::bits_of(v));
    }
    template <class T>
    void operator()(const Field& f, const std::optional<T>& v) noexcept {
        if (v) {
            f_.varint(1);
            (*this)(f, *v);
        } else {
            f_.varint(0);
        }
    }
    template <class T>
    void operator()(const Field& f, const Tail<T>& v) noexcept {
        const size_t n = f_.items_that_fit(v.size);
        f_.varint(n);
        for (size_t i = 0; i < n; ++i) (*this)(f, v.data[i]);
    }
    void key(const Field&, std::string_view key) noexcept { f_.bytes(key); }

private:
    Frame& f_;
};

/// The predicted encoder of record R: the mask of the fields that differ from their predictions,
/// then those fields, each as the plain encoder writes it, except t and addr: the zigzag of the
/// difference from the prediction. Updates the predictions. Version 2: field i's bit is i + 1, and
/// the rule fields (binary::Rules) are written as `coded` says.
template <class R>
class PredictedEncoder {
public:
    PredictedEncoder(binary::Predictions& p, Frame& values, const binary::Coded* coded = nullptr) noexcept
        : p_(p), values_(values), coded_(coded), shift_(coded != nullptr ? 1 : 0) {}

    template <class T>
    void operator()(const Field& f, const T& v) {
        if (coded_ != nullptr && binary::Rules<R>::is_rule(i_)) {
            if (coded_->coded(i_)) {
                mask_ |= uint64_t{1} << (i_ + shift_);
                values_.varint(coded_->value[i_]);
            }
            ++i_;
            return;
        }
        binary::Slot& s = p_.template slot<R>(i_);
        const uint64_t bits = binary::bits_of(v);
        if (!s.known || bits != s.bits) {
            mask_ |= uint64_t{1} << (i_ + shift_);
            if (binary::Predictions::is_delta<R>(i_)) {
                values_.varint(zigzag(static_cast<int64_t>(bits - s.bits)));
            } else {
                PlainEncoder{values_}(f, v);
            }
            s.bits = bits;
            s.known = true;
        }
        ++i_;
    }
    template <class T>
    void operator()(const Field& f, const std::optional<T>& v) {
        binary::Slot& s = p_.template slot<R>(i_);
        const uint64_t bits = v ? binary::bits_of(*v) : 0;
        if (!s.known || v.has_value() != s.present || bits != s.bits) {
            mask_ |= uint64_t{1} << (i_ + shift_);
            PlainEncoder{values_}(f, v);
            s.bits = bits;
            s.present = v.has_value();
            s.known = true;
        }
        ++i_;
    }
    void operator()(const Field& f, std::string_view v) {
        binary::Slot& s = p_.template slot<R>(i_);
        if (!s.known || v != s.str) {
            mask_ |= uint64_t{1} << (i_ + shift_);
            PlainEncoder{values_}(f, v);
            s.str.assign(v.data(), v.size());
            s.known = true;
        }
        ++i_;
    }
    uint64_t mask() const noexcept { return mask_; }

private:
    binary::Predictions& p_;
    Frame& values_;
    const binary::Coded* coded_;
    size_t shift_;
    size_t i_ = 0;
    uint64_t mask_ = 0;
};

/// Writes record `r` as a plain frame.
template <class R>
std::string_view encode_plain(const R& r, Frame& frame) noexcept {
    frame.begin(R::kLetter);
    PlainEncoder e(frame);
    R::fields(e, r);
    return frame.finish();
}

/// Writes predicted record `r` as a frame, against and into `p` (of its version).
template <class R>
std::string_view encode_predicted(const R& r, binary::Predictions& p, Frame& values, Frame& frame) {
    static_assert(is_predicted<R>() && binary::field_count<R>() + 1 <= binary::kMaxPredictedFields);
    values.begin(R::kLetter);
    binary::Coded coded;
    const bool rules = p.version() >= 2;
    if (rules) {
        binary::Rules<R>::plan(p, r, coded);
        if (coded.has_rank) values.varint(coded.rank);
    }
    PredictedEncoder<R> e(p, values, rules ? &coded : nullptr);
    R::fields(e, r);
    if (rules) binary::Rules<R>::commit(p, r, coded);
    frame.begin(R::kLetter);
    frame.varint(e.mask() | (coded.has_rank ? 1 : 0));
    std::string_view v = values.finish();
    // The values' frame header (letter, length) is not part of this frame's payload.
    const size_t head = v.size() - values.size();
    for (size_t i = head; i < v.size() && frame.room(1); ++i) frame.raw(v[i]);
    return frame.finish();
}

}  // namespace memguard::format

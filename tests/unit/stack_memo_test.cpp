// StackMemo (track/stack_memo.h) with the real unwinder: every id the memo gives equals the id that
// unwinding and interning the same stack gives, also when a stack with the same first frame and
// slot has different frames above it, across recursion depths, threads and a native cut; the
// unwinder's slots hold its return addresses; a miss asks the cursor only for frames whose sizes
// (track/frame_sizes.h) it has not learned. FrameSizes alone, over a stack laid out by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "track/frame_sizes.h"
#include "track/recorder.h"
#include "track/stack_memo.h"
#include "track/testing/fake_clock.h"
#include "track/testing/memory_sink.h"
#include "track/unwind.h"

extern "C" {
using Hook = uint32_t (*)(int mode);
uint32_t memo_chain_a(Hook hook, int mode);
uint32_t memo_chain_b(Hook hook, int mode);
uint32_t memo_chain_deep(Hook hook, int mode, int depth, int which);
void memo_chain_range(uintptr_t* lo, uintptr_t* hi);
}

namespace memguard::track {
namespace {

Recorder* g_rec = nullptr;
uintptr_t g_last_slot = 0;

enum Mode { kReference = 0, kMemo = 1, kSlots = 2 };
std::vector<uintptr_t> g_ips, g_slots;
int g_slot_mismatches = -1, g_mismatch_at = -1;

/// What allocator mode's memguard_alloc does: its caller is the stack's first frame. In this
/// binary, like memguard_alloc in libmemguard.so, so the unwinder drops it.
__attribute__((noipa)) uint32_t hook(int mode) {
    const uintptr_t* ret_slot = static_cast<const uintptr_t*>(__builtin_frame_address(0)) + 1;
    if (*ret_slot != reinterpret_cast<uintptr_t>(__builtin_return_address(0))) ret_slot = nullptr;
    g_last_slot = reinterpret_cast<uintptr_t>(ret_slot);
    if (mode == kMemo) return g_rec->capture_interned_stack(ret_slot);
    if (mode == kSlots) {
        uintptr_t ips[Recorder::kStackCapacity], slots[Recorder::kStackCapacity];
        NativeUnwinder u;
        int n = u.capture_with_slots(ips, slots, Recorder::kStackCapacity, Recorder::kStackCapacity, nullptr);
        g_ips.assign(ips, ips + (n > 0 ? n : 0));
        g_slots.assign(slots, slots + (n > 0 ? n : 0));
        // Checked here, while the frames are live.
        g_slot_mismatches = 0;
        // From frame 1: frame 0 is this function, whose slot held the unwinder's return address,
        // dead once it returned.
        for (int i = 1; i < n; ++i) {
            if (slots[i] == 0 || *reinterpret_cast<const uintptr_t*>(slots[i]) != ips[i] ||
                (i > 1 && slots[i] <= slots[i - 1])) {
                ++g_slot_mismatches;
                g_mismatch_at = i;
            }
        }
        return static_cast<uint32_t>(n);
    }
    uintptr_t ips[Recorder::kStackCapacity];
    return g_rec->intern_stack(ips, g_rec->capture_stack(ips));
}

// noipa: no clone per mode (each clone would be another call site, another stack).
// Both modes from one call site (a loop the compiler cannot unroll into two), so that the
// reference and the memo see the same stack.
volatile int g_calls = 0;
__attribute__((noipa)) void call_both(int depth, int which, uint32_t* got) {
    for (volatile int mode = kReference; mode <= kMemo; mode = mode + 1) {
        got[mode] = memo_chain_deep(&hook, mode, depth, which);
        g_calls = g_calls + 1;
    }
}
__attribute__((noipa)) uint32_t call_chain(int mode, int depth, int which) {
    uint32_t id = memo_chain_deep(&hook, mode, depth, which);
    g_calls = g_calls + 1;
    return id;
}

/// The native unwinder, counting the cursor's unwinds (a StackMemo miss's slow path).
class CountingUnwinder final : public Unwinder {
public:
    int capture(uintptr_t* ips, int max) noexcept override { return native.capture(ips, max); }
    int capture_with_slots(uintptr_t* ips, uintptr_t* slots, int capacity, int max,
                           const TextRange* stop) noexcept override {
        ++cursor_unwinds;
        return native.capture_with_slots(ips, slots, capacity, max, stop);
    }
    TextRange own_code() const noexcept override { return native.own_code(); }
    const char* name() const noexcept override { return native.name(); }
    void before_fork() noexcept override { native.before_fork(); }
    void after_fork() noexcept override { native.after_fork(); }

    NativeUnwinder native;
    int cursor_unwinds = 0;
};

class StackMemoTest : public ::testing::Test {
protected:
    void SetUp() override {
        // ThreadSanitizer processes unwind with libgcc (unwind.cpp says why), which names no slots:
        // there the memo is never used.
        if (std::string(unwinder.name()) != "libunwind") GTEST_SKIP() << "the memo needs libunwind's cursor";
        Config c;
        c.output_template = "/in-memory/report.mgr";
        c.stack_depth = 64;
        rec = std::make_unique<Recorder>(c, sink, clock, unwinder);
        g_rec = rec.get();
    }
    void TearDown() override { g_rec = nullptr; }

    /// The memo's id and the reference id of the same call, through A (which 0) or B (1).
    void expect_same(int depth, int which) {
        uint32_t got[2] = {0, 0};
        call_both(depth, which, got);
        uint32_t ref = got[kReference], memo = got[kMemo];
        ASSERT_NE(ref, 0u);
        if (memo != ref) {
            std::unordered_set<uint32_t> ids{ref, memo};
            std::unordered_map<uint32_t, std::vector<uintptr_t>> frames;
            rec->stack_frames(ids, &frames);
            for (uint32_t id : ids) {
                std::string line;
                for (uintptr_t ip : frames[id]) line += " " + std::to_string(ip);
                ADD_FAILURE() << "stack " << id << ":" << line;
            }
        }
        EXPECT_EQ(memo, ref) << "depth " << depth << " via " << (which ? "B" : "A");
    }

    testing::FakeClock clock;
    testing::MemorySink sink{clock};
    CountingUnwinder unwinder;
    std::unique_ptr<Recorder> rec;
};

TEST_F(StackMemoTest, TheUnwindersSlotsHoldItsReturnAddressesWhichAreCapturesFrames) {
    ASSERT_GT(memo_chain_a(&hook, kSlots), 3u);
    const size_t n = g_ips.size();
    // Every slot named (no signal frame here), holding its return address, each above the last.
    EXPECT_EQ(g_slot_mismatches, 0) << "at frame " << g_mismatch_at << " of " << n;
    // The same frames as capture() (the fast trace) gives from the same place.
    uintptr_t ips[Recorder::kStackCapacity];
    NativeUnwinder u;
    int m = u.capture(ips, Recorder::kStackCapacity);
    ASSERT_GT(m, 3);
    // Both start inside this test (different call sites); from the test's caller on they agree.
    const size_t tail = static_cast<size_t>(m) - 1;
    ASSERT_GE(n, tail);
    for (size_t i = 0; i + 1 < static_cast<size_t>(m) && i < 8; ++i) {
        EXPECT_EQ(ips[static_cast<size_t>(m) - 1 - i], g_ips[n - 1 - i]) << "frame " << i << " from the outermost";
    }
}

TEST_F(StackMemoTest, IdsEqualUnwindingWhetherAStackIsFoundOrNot) {
    // A and B put C's return address in the same slot; the frames above differ.
    memo_chain_a(&hook, kMemo);
    uintptr_t via_a = g_last_slot;
    memo_chain_b(&hook, kMemo);
    uintptr_t via_b = g_last_slot;
    EXPECT_NE(via_a, 0u);
    for (int round = 0; round < 50; ++round) {
        for (int which = 0; which < 2; ++which) expect_same(0, which);
        for (int depth = 1; depth < 12; depth += 3) expect_same(depth, round % 2);
    }
    StackMemo* memo = StackMemo::for_this_thread();
    ASSERT_NE(memo, nullptr);
    EXPECT_GT(memo->hits(), 100u) << "misses " << memo->misses() << " slot " << via_a;
    // Same slot, other frames above: the memo must have told them apart (checked by the ids);
    // this says whether this build exercised that case.
    RecordProperty("same_slot_via_a_and_b", via_a == via_b ? "yes" : "no");
}

TEST_F(StackMemoTest, AMissAsksTheCursorOnlyForFramesItHasNotSeen) {
    // Recursion deeper each call: every call of the first pass is a miss (the hook's slot moves),
    // and each new depth adds one frame of the recursive function, whose size is learned per slot
    // alignment (8 classes). Once the depths have gone through every class, no miss needs the
    // cursor. One call site for all (another call site is another frame).
    int learned = -1;
    uint64_t hits_before = 0;
    StackMemo* memo = nullptr;
    // A volatile loop, so that the compiler makes no second copy of the call (unswitched or
    // peeled): two passes over depths 0-39; the cursor's count is read at depth 24 of the first.
    for (volatile int i = 0; i < 80; i = i + 1) {
        if (i == 24) learned = unwinder.cursor_unwinds;
        if (i == 40) {
            memo = StackMemo::for_this_thread();
            ASSERT_NE(memo, nullptr);
            hits_before = memo->hits();
            EXPECT_EQ(unwinder.cursor_unwinds, learned) << "a miss through known frames ran the cursor";
        }
        expect_same(i % 40, 0);
    }
    EXPECT_GT(learned, 0);
    EXPECT_LE(learned, 12) << "the cursor ran for most misses";
    // The second pass: every stack was remembered from sizes, found without unwinding.
    EXPECT_EQ(memo->hits(), hits_before + 40);
    EXPECT_EQ(unwinder.cursor_unwinds, learned);
}

TEST_F(StackMemoTest, IdsEqualUnwindingUnderANativeCut) {
    uintptr_t lo = 0, hi = 0;
    memo_chain_range(&lo, &hi);
    rec->set_native_cut(TextRange{lo, hi});
    for (int round = 0; round < 20; ++round) {
        for (int depth = 0; depth < 6; ++depth) expect_same(depth, (round + depth) % 2);
    }
    // Under the cut a stack ends at C: A and B give one stack.
    EXPECT_EQ(call_chain(kMemo, 0, 0), call_chain(kMemo, 0, 1));
}

TEST_F(StackMemoTest, EachThreadHasItsOwnMemoAndGetsTheSameIds) {
    std::vector<uint32_t> ids(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i) {
                uint32_t got[2] = {0, 0};
                call_both(t, t % 2, got);
                uint32_t ref = got[kReference], memo = got[kMemo];
                if (memo != ref) {
                    ids[static_cast<size_t>(t)] = 0;
                    return;
                }
                ids[static_cast<size_t>(t)] = memo;
            }
            StackMemo* m = StackMemo::for_this_thread();
            if (!m || m->hits() < 150) ids[static_cast<size_t>(t)] = 0;
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_NE(ids[static_cast<size_t>(t)], 0u) << "thread " << t;
}

TEST_F(StackMemoTest, AStackThatNoLongerHoldsItsFramesIsNotFound) {
    // A remembered stack whose outer slot changed is a miss, and one in no slot of this thread's
    // stack is never remembered.
    StackMemo memo(0x1000, 0x100000);
    alignas(16) uintptr_t stack[4] = {0x401000, 0x402000, 0x403000, 0x404000};
    uintptr_t slots[4];
    for (int i = 0; i < 4; ++i) slots[i] = reinterpret_cast<uintptr_t>(&stack[i]);
    StackMemo local(slots[0], slots[3] + sizeof(uintptr_t));
    local.remember(slots, stack, 4, 7, 1);
    EXPECT_EQ(local.find(&stack[0], 1), 7u);
    EXPECT_EQ(local.find(&stack[0], 2), 0u);  // another epoch
    stack[2] = 0x405000;
    EXPECT_EQ(local.find(&stack[0], 1), 0u);
    stack[2] = 0x403000;
    EXPECT_EQ(local.find(&stack[0], 1), 7u);
    memo.remember(slots, stack, 4, 9, 1);  // outside memo's stack bounds: ignored
    EXPECT_EQ(memo.find(&stack[0], 1), 0u);
}

// FrameSizes over a stack laid out by hand: frame i's return address at stack[at[i]].
class FrameSizesTest : public ::testing::Test {
protected:
    void SetUp() override {
        for (int i = 0; i < 4; ++i) {
            stack[at[i]] = ips[i];
            slots[i] = slot(at[i]);
        }
    }
    uintptr_t slot(int word) const { return reinterpret_cast<uintptr_t>(&stack[word]); }
    FrameSizes::Walk walk(uintptr_t* out) { return sizes->walk(ips, 4, slots[0], slot(0), slot(64), out); }

    alignas(64) uintptr_t stack[64] = {};
    const int at[4] = {1, 5, 6, 20};
    const uintptr_t ips[4] = {0x401000, 0x402000, 0x403000, 0x404000};
    uintptr_t slots[4] = {};
    std::unique_ptr<FrameSizes> sizes = std::make_unique<FrameSizes>();
};

TEST_F(FrameSizesTest, LearnedSizesGiveEverySlot) {
    uintptr_t out[4] = {};
    EXPECT_EQ(walk(out), FrameSizes::Walk::Unknown);
    sizes->learn(ips, slots, 4);
    EXPECT_EQ(sizes->size_of(ips[0], slots[0]), 32);
    EXPECT_EQ(sizes->size_of(ips[1], slots[1]), 8);
    EXPECT_EQ(sizes->size_of(ips[2], slots[2]), 112);
    EXPECT_EQ(sizes->size_of(ips[3], slots[3]), 0);  // the outermost frame's caller is unknown
    ASSERT_EQ(walk(out), FrameSizes::Walk::Found);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], slots[i]) << i;
    // Another alignment of the same frames is another key.
    EXPECT_EQ(sizes->size_of(ips[0], slots[0] + 8), 0);
}

TEST_F(FrameSizesTest, ASlotNotHoldingItsReturnAddressIsNeverUsedAgain) {
    sizes->learn(ips, slots, 4);
    uintptr_t out[4] = {};
    stack[at[2]] = 0x999000;  // frame 1's size now leads to another value
    EXPECT_EQ(walk(out), FrameSizes::Walk::Unusable);
    EXPECT_EQ(sizes->size_of(ips[1], slots[1]), -1);
    stack[at[2]] = ips[2];
    EXPECT_EQ(walk(out), FrameSizes::Walk::Unusable);
    sizes->learn(ips, slots, 4);  // learning the same size again does not bring it back
    EXPECT_EQ(walk(out), FrameSizes::Walk::Unusable);
}

TEST_F(FrameSizesTest, TwoSizesForOneFrameOrAnUnknownSlotMakeItUnusable) {
    sizes->learn(ips, slots, 4);
    uintptr_t other[4] = {slots[0], slots[0] + 16, slots[2], slots[3]};  // frame 0 with another size
    sizes->learn(ips, other, 4);
    EXPECT_EQ(sizes->size_of(ips[0], slots[0]), -1);
    uintptr_t no_slot[4] = {slots[0], slots[1], 0, slots[3]};  // the unwinder could not say (a signal frame)
    auto fresh = std::make_unique<FrameSizes>();
    fresh->learn(ips, no_slot, 4);
    EXPECT_EQ(fresh->size_of(ips[0], slots[0]), 32);
    EXPECT_EQ(fresh->size_of(ips[1], slots[1]), -1);
    // A slot outside the stack's bounds is never read.
    uintptr_t out[4] = {};
    EXPECT_EQ(sizes->walk(ips, 4, slots[0], slot(2), slot(64), out), FrameSizes::Walk::Unusable);
    EXPECT_EQ(fresh->walk(ips, 0, slots[0], slot(0), slot(64), out), FrameSizes::Walk::Unusable);
}

}  // namespace
}  // namespace memguard::track

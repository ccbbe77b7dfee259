// StackMemo (track/stack_memo.h) with the real unwinder: every id the memo gives equals the id that
// unwinding and interning the same stack gives, also when a stack with the same first frame and
// slot has different frames above it, across recursion depths, threads and a native cut; the
// unwinder's slots hold its return addresses.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
    NativeUnwinder unwinder;
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

}  // namespace
}  // namespace memguard::track

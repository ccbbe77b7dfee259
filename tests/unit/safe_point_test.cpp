// The compile-garbage safe-point rule (python/safe_point.h), driven by events without an
// interpreter: frame depths and boundaries as locate_compiling_call() finds them, returns as the
// profile function reports them, and the moment's facts as the hook reads them.
#include <gtest/gtest.h>

#include "python/safe_point.h"

namespace memguard::python {
namespace {

using Step = CompileMark::Step;

constexpr int64_t kMs = 1000000;

/// A return event and, when the mark asks, the moment: what the profile function does.
Step ret(CompileMark& m, Exit exit = Exit::Normal, Moment moment = {}) {
    Step s = m.frame_returned(exit);
    return s == Step::AskMoment ? CompileMark::decide(moment) : s;
}

/// Returns until the mark says Collect; the number of returns it took (-1: never within `max`).
int returns_until_collect(CompileMark& m, int max = 100, Moment moment = {}) {
    for (int i = 1; i <= max; ++i) {
        if (ret(m, Exit::Normal, moment) == Step::Collect) return i;
    }
    return -1;
}

TEST(SafePoint, NoMarkMeansNothingToWatch) {
    CompileMark m;
    EXPECT_FALSE(m.pending());
    EXPECT_EQ(m.frame_returned(Exit::Normal), Step::StopWatching);
}

TEST(SafePoint, CollectsWhenTheCallingFrameReturns) {
    PendingMarks pending;
    CompileMark m;
    // The end callback runs 12 frames deep; the frame that called the compiled one is at depth 7.
    m.compile_ended("0/0", CallSite{12, 7}, 100 * kMs, pending);
    EXPECT_TRUE(m.pending());
    EXPECT_EQ(pending.threads, 1);
    // Frames 12..8 are dynamo's machinery and the compiled call: their returns are not safe points.
    for (int depth = 12; depth > 7; --depth) EXPECT_EQ(ret(m), Step::Ignore) << "depth " << depth;
    EXPECT_EQ(ret(m), Step::Collect);  // depth 7 returns: the compiling call has returned
    EXPECT_EQ(m.compile_ids(), "0/0");
    EXPECT_EQ(m.age_ns(350 * kMs), 250 * kMs);
    EXPECT_TRUE(m.collected(pending));
    EXPECT_FALSE(m.pending());
    EXPECT_EQ(pending.threads, 0);
    EXPECT_EQ(m.frame_returned(Exit::Normal), Step::StopWatching);
}

TEST(SafePoint, CallsBelowTheBoundaryAreFollowed) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{5, 3}, 0, pending);
    EXPECT_EQ(ret(m), Step::Ignore);  // 5
    EXPECT_EQ(ret(m), Step::Ignore);  // 4
    // The compiled frame calls three deeper functions that return: none of them is the caller.
    m.frame_called();
    m.frame_called();
    m.frame_called();
    EXPECT_EQ(ret(m), Step::Ignore);
    EXPECT_EQ(ret(m), Step::Ignore);
    EXPECT_EQ(ret(m), Step::Ignore);
    EXPECT_EQ(m.depth(), 3);
    EXPECT_EQ(ret(m), Step::Collect);
}

TEST(SafePoint, ShallowerReturnsAlsoCountOnceTheBoundaryIsPassed) {
    // A return skipped for another reason (here an exception) leaves the next, shallower one.
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{4, 4}, 0, pending);
    EXPECT_EQ(ret(m, Exit::Exception), Step::Ignore);  // depth 4, raising
    EXPECT_EQ(ret(m, Exit::Normal), Step::Collect);    // depth 3
}

TEST(SafePoint, NoBoundaryOnTheStackMeansAnyReturn) {
    // A lazy backward compile on the autograd thread: no convert_frame or AOT runtime frame.
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("1/0", CallSite{3, -1}, 0, pending);
    EXPECT_EQ(ret(m), Step::Collect);
}

TEST(SafePoint, NeverWhileDynamoCompilesOnTheThread) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{2, 2}, 0, pending);
    Moment tracing;
    tracing.dynamo_compiling = true;
    EXPECT_EQ(returns_until_collect(m, 50, tracing), -1);
    EXPECT_TRUE(m.pending());
    EXPECT_EQ(ret(m), Step::Collect);  // the compile context is gone: the next return collects
}

TEST(SafePoint, NeverInsideACompiledRegion) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{2, 2}, 0, pending);
    Moment region;
    region.in_compiled_region = true;
    EXPECT_EQ(returns_until_collect(m, 50, region), -1);
    EXPECT_EQ(ret(m), Step::Collect);
}

TEST(SafePoint, DeferredWhileAnyStreamCaptureIsActive) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{6, 4}, 0, pending);
    Moment capturing;
    capturing.capture_active = true;
    EXPECT_EQ(ret(m, Exit::Normal, capturing), Step::Ignore);  // 6
    EXPECT_EQ(ret(m, Exit::Normal, capturing), Step::Ignore);  // 5
    EXPECT_EQ(ret(m, Exit::Normal, capturing), Step::Ignore);  // 4: the safe point, but a capture runs
    EXPECT_EQ(ret(m, Exit::Normal, capturing), Step::Ignore);  // 3
    EXPECT_TRUE(m.pending());
    EXPECT_EQ(ret(m), Step::Collect);  // 2: the capture ended meanwhile
}

TEST(SafePoint, ExceptionsKeepTheMark) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{5, 4}, 0, pending);
    // The compiled call raises; the exception passes every frame up to the handler at depth 1.
    for (int depth = 5; depth > 1; --depth) EXPECT_EQ(ret(m, Exit::Exception), Step::Ignore);
    EXPECT_TRUE(m.pending());
    // The handler's frame returns normally.
    EXPECT_EQ(ret(m), Step::Collect);
}

TEST(SafePoint, AnExceptionReportedAsAReturnKeepsTheMark) {
    // CPython 3.12 reports an exception's way out as a return with a value; the frame stopped at
    // the instruction that raised.
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{3, 3}, 0, pending);
    Moment raised;
    raised.stopped_at_raise = true;
    EXPECT_EQ(ret(m, Exit::Normal, raised), Step::Ignore);
    EXPECT_EQ(ret(m, Exit::Normal, raised), Step::Ignore);
    EXPECT_EQ(ret(m), Step::Collect);
}

TEST(SafePoint, SeveralCompilesBeforeOneReturnShareOneCollection) {
    PendingMarks pending;
    CompileMark m;
    // A graph break: the frame compiles (0/0), then its resume function (1/0) deeper in the
    // same call, then a recompile (0/1).
    m.compile_ended("0/0", CallSite{10, 5}, 10 * kMs, pending);
    EXPECT_EQ(ret(m), Step::Ignore);  // 10
    m.compile_ended("1/0", CallSite{14, 9}, 20 * kMs, pending);
    m.compile_ended("0/1", CallSite{12, 8}, 30 * kMs, pending);
    EXPECT_EQ(pending.threads, 1);  // one thread, one pending mark
    EXPECT_EQ(m.boundary(), 5);     // the outermost compiling call
    EXPECT_EQ(returns_until_collect(m), 12 - 5 + 1);
    EXPECT_EQ(m.compile_ids(), "0/0,1/0,0/1");
    EXPECT_EQ(m.age_ns(40 * kMs), 30 * kMs);  // from the first mark
    EXPECT_TRUE(m.collected(pending));
}

TEST(SafePoint, ACompileWithoutBoundaryDoesNotRelaxAnEarlierOne) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{8, 4}, 0, pending);
    m.compile_ended("0/0", CallSite{9, -1}, 0, pending);  // a lazy backward compile inside it
    EXPECT_EQ(m.boundary(), 4);
    CompileMark n;
    n.compile_ended("1/0", CallSite{3, -1}, 0, pending);
    n.compile_ended("0/0", CallSite{8, 4}, 0, pending);  // a boundary after none: the boundary holds
    EXPECT_EQ(n.boundary(), 4);
    EXPECT_EQ(returns_until_collect(n), 8 - 4 + 1);
}

TEST(SafePoint, CompileIdsAreBounded) {
    PendingMarks pending;
    CompileMark m;
    for (int i = 0; i < 5000; ++i) m.compile_ended("12/34", CallSite{2, 1}, 0, pending);
    EXPECT_GE(m.compile_ids().size(), CompileMark::kMaxIdsChars);
    EXPECT_LT(m.compile_ids().size(), CompileMark::kMaxIdsChars + 8);
    EXPECT_EQ(m.compile_ids().compare(0, 12, "12/34,12/34,"), 0);
}

TEST(SafePoint, MarksAreTheirOwnThreads) {
    // Thread A compiles; thread B (no mark) never collects, whatever it returns, and A's
    // collection waits for A's own return.
    PendingMarks pending;
    CompileMark a, b;
    a.compile_ended("0/0", CallSite{6, 3}, 0, pending);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(ret(b), Step::StopWatching);
    EXPECT_TRUE(a.pending());
    EXPECT_FALSE(b.pending());
    EXPECT_EQ(returns_until_collect(a), 6 - 3 + 1);
}

TEST(SafePoint, TheWindowClosesOnlyWithTheLastThreadsMark) {
    PendingMarks pending;
    CompileMark a, b;
    a.compile_ended("0/0", CallSite{4, 2}, 0, pending);
    b.compile_ended("1/0", CallSite{5, 3}, 0, pending);
    EXPECT_EQ(pending.threads, 2);
    EXPECT_EQ(returns_until_collect(b), 3);
    EXPECT_FALSE(b.collected(pending));  // a still waits: the compile window stays open
    EXPECT_EQ(pending.threads, 1);
    EXPECT_EQ(b.compile_ids(), "");
    EXPECT_EQ(a.compile_ids(), "0/0");
    EXPECT_EQ(returns_until_collect(a), 3);
    EXPECT_TRUE(a.collected(pending));
    EXPECT_EQ(pending.threads, 0);
}

TEST(SafePoint, AClearedMarkStartsAfresh) {
    PendingMarks pending;
    CompileMark m;
    m.compile_ended("0/0", CallSite{3, 2}, 5 * kMs, pending);
    EXPECT_EQ(returns_until_collect(m), 2);
    m.collected(pending);
    EXPECT_EQ(m.boundary(), -1);
    m.compile_ended("0/1", CallSite{9, 6}, 50 * kMs, pending);
    EXPECT_EQ(m.boundary(), 6);  // not the old mark's
    EXPECT_EQ(m.compile_ids(), "0/1");
    EXPECT_EQ(m.age_ns(60 * kMs), 10 * kMs);
    EXPECT_EQ(pending.threads, 1);
    EXPECT_EQ(returns_until_collect(m), 9 - 6 + 1);
}

TEST(SafePoint, DecideNeedsEveryFactClear) {
    EXPECT_EQ(CompileMark::decide(Moment{}), Step::Collect);
    for (int bit = 0; bit < 4; ++bit) {
        Moment m;
        m.capture_active = bit == 0;
        m.stopped_at_raise = bit == 1;
        m.dynamo_compiling = bit == 2;
        m.in_compiled_region = bit == 3;
        EXPECT_EQ(CompileMark::decide(m), Step::Ignore) << "fact " << bit;
    }
}

}  // namespace
}  // namespace memguard::python

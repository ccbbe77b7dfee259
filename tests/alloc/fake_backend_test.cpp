// The fake device backend behaves like the device in what the allocator tests rely on, and
// reports the misuses the real device would punish.
#include <gtest/gtest.h>

#include "alloc/testing/fake_backend.h"

namespace memguard::alloc::testing {
namespace {

constexpr size_t MiB = 1024 * 1024;

TEST(FakeBackend, AddressesDoNotOverlapAndCapacityHolds) {
    FakeBackend fake(1, 10 * MiB);
    void* a = nullptr;
    void* b = nullptr;
    void* c = nullptr;
    ASSERT_EQ(fake.segment_malloc(0, 4 * MiB, &a), kSuccess);
    ASSERT_EQ(fake.segment_malloc(0, 4 * MiB, &b), kSuccess);
    EXPECT_GE(reinterpret_cast<uintptr_t>(b), reinterpret_cast<uintptr_t>(a) + 4 * MiB);
    EXPECT_EQ(fake.segment_malloc(0, 4 * MiB, &c), kErrorMemoryAllocation);
    size_t free_b = 0, total = 0;
    ASSERT_EQ(fake.mem_info(0, &free_b, &total), kSuccess);
    EXPECT_EQ(total, 10 * MiB);
    EXPECT_EQ(free_b, 2 * MiB);
    EXPECT_EQ(fake.segment_free(0, a), kSuccess);
    ASSERT_EQ(fake.segment_malloc(0, 4 * MiB, &c), kSuccess);
    EXPECT_EQ(c, a);  // the freed range is handed out again
    size_t len = 0;
    EXPECT_EQ(fake.segment_of(0, reinterpret_cast<uintptr_t>(c) + 100, &len), reinterpret_cast<uintptr_t>(c));
    EXPECT_EQ(len, 4 * MiB);
    EXPECT_TRUE(fake.misuses().empty());
}

TEST(FakeBackend, FailureInjection) {
    FakeBackend fake(1, 10 * MiB);
    fake.fail_next_mallocs(2, 999);
    void* p = nullptr;
    EXPECT_EQ(fake.segment_malloc(0, MiB, &p), 999);
    EXPECT_EQ(fake.segment_malloc(0, MiB, &p), 999);
    EXPECT_EQ(fake.segment_malloc(0, MiB, &p), kSuccess);
}

TEST(FakeBackend, EventsFollowTheirStream) {
    FakeBackend fake(1);
    Event e = 0;
    ASSERT_EQ(fake.event_create(0, &e), kSuccess);
    EXPECT_EQ(fake.event_query(0, e), kSuccess);  // never recorded: complete, as in CUDA
    fake.submit(7);
    ASSERT_EQ(fake.event_record(0, e, 7), kSuccess);
    fake.submit(7);  // later work does not delay the event
    EXPECT_EQ(fake.event_query(0, e), kErrorNotReady);
    fake.complete(8);
    EXPECT_EQ(fake.event_query(0, e), kErrorNotReady);
    fake.complete(7);
    EXPECT_EQ(fake.event_query(0, e), kSuccess);
    fake.submit(7);
    ASSERT_EQ(fake.event_record(0, e, 7), kSuccess);
    fake.set_auto_complete_after(2);
    EXPECT_EQ(fake.event_query(0, e), kErrorNotReady);
    EXPECT_EQ(fake.event_query(0, e), kSuccess);
    EXPECT_EQ(fake.completed(7), fake.submitted(7));
    EXPECT_TRUE(fake.misuses().empty());
}

TEST(FakeBackend, FreeSynchronizesTheDevice) {
    FakeBackend fake(1);
    void* p = nullptr;
    ASSERT_EQ(fake.segment_malloc(0, MiB, &p), kSuccess);
    fake.submit(3);
    EXPECT_EQ(fake.completed(3), 0u);
    ASSERT_EQ(fake.segment_free(0, p), kSuccess);
    EXPECT_EQ(fake.completed(3), 1u);
}

TEST(FakeBackend, ReportsCaptureUnsafeCalls) {
    FakeBackend fake(1);
    void* p = nullptr;
    ASSERT_EQ(fake.segment_malloc(0, MiB, &p), kSuccess);
    Event e = 0;
    ASSERT_EQ(fake.event_create(0, &e), kSuccess);
    fake.begin_capture(5);
    EXPECT_TRUE(fake.stream_capturing(0, 5));
    EXPECT_FALSE(fake.stream_capturing(0, 6));
    EXPECT_TRUE(fake.any_capture_active(0));
    EXPECT_EQ(fake.event_query(0, e), kErrorStreamCaptureUnsupported);
    EXPECT_EQ(fake.event_synchronize(0, e), kErrorStreamCaptureUnsupported);
    EXPECT_EQ(fake.event_record(0, e, 5), kErrorStreamCaptureUnsupported);
    EXPECT_EQ(fake.segment_free(0, p), kErrorStreamCaptureUnsupported);
    void* q = nullptr;
    EXPECT_EQ(fake.segment_malloc(0, MiB, &q), kErrorStreamCaptureUnsupported);  // global mode
    int mode = kCaptureModeRelaxed;
    fake.exchange_capture_mode(&mode);
    EXPECT_EQ(mode, kCaptureModeGlobal);
    EXPECT_EQ(fake.segment_malloc(0, MiB, &q), kSuccess);  // relaxed mode
    fake.exchange_capture_mode(&mode);
    EXPECT_EQ(FakeBackend::thread_capture_mode(), kCaptureModeGlobal);
    fake.end_capture(5);
    EXPECT_EQ(fake.misuses().size(), 5u);
    EXPECT_EQ(fake.segment_free(0, p), kSuccess);
    int x = 0;
    EXPECT_EQ(fake.segment_free(0, &x), 1);  // unknown address
    EXPECT_EQ(fake.misuses().size(), 6u);
}

}  // namespace
}  // namespace memguard::alloc::testing

// The category engine (report/categories.h, docs/categories.md): every rule on reports written by
// hand, in allocator mode (T blocks) and interposition mode (segments, g tags, d blocks).
#include <gtest/gtest.h>

#include <cstdio>

#include "loaded_module.h"
#include "report/categories.h"
#include "report/category_rules.h"
#include "test_util.h"

namespace {
void* g_blas_ip = nullptr;
__attribute__((noinline)) void blas_recorder() { g_blas_ip = __builtin_return_address(0); }
}  // namespace

// Named as PyTorch's (at::cuda::getCUDABlasLtWorkspace): the rule reads the function name of a frame.
namespace at::cuda {
__attribute__((noinline)) void* getCUDABlasLtWorkspace() {
    blas_recorder();
    asm volatile("" ::: "memory");  // no tail call: the return address stays inside this function
    return g_blas_ip;
}
}  // namespace at::cuda

namespace memguard::report {
namespace {

using test::parse;

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

// Modules by address range: the CUDA runtime (skipped), PyTorch, NCCL, cuBLASLt, another library,
// the executable. Stack i's innermost frame is memguard's cudart frame, then the module's.
const std::string kModules = "M 0 1000 2000 0 - /opt/t/lib/libcudart.so.12\n"
                             "M 1 3000 4000 0 - /opt/t/torch/lib/libc10_cuda.so\n"
                             "M 2 5000 6000 0 - /opt/t/lib/libnccl.so.2\n"
                             "M 3 7000 8000 0 - /opt/t/lib/libcublasLt.so.12\n"
                             "M 4 9000 a000 0 - /opt/t/lib/libtransformer_engine.so\n"
                             "M 5 b000 c000 0 - /opt/t/bin/python3\n"
                             "S 1 1100 3100\n"  // PyTorch
                             "S 2 1100 5100\n"  // NCCL
                             "S 3 1100 7100\n"  // cuBLASLt
                             "S 4 1100 9100\n"  // another library
                             "S 5 1100 b100\n"  // the program
                             "S 6 1100 e100\n"  // no module: nothing to go by
                             "p 1 10 benchmark_gpu /usr/lib/python3/site-packages/torch/_inductor/select_algorithm.py\n"
                             "p 2 41 forward /app/model.py\n"
                             "P 1 1 2\n"
                             "P 2 2\n";

std::string hdr(bool allocator) {
    return std::string("I format_minor 8\n") + (allocator ? "I allocator memguard\n" : "") + kModules;
}

/// The events applied once every record up to time `t` is (a point "at" t).
size_t at_time(const Report& r, int64_t t) {
    size_t n = 0;
    while (n < r.events.size() && r.events[n].t <= t) ++n;
    return n;
}

uint64_t bytes_of(const Breakdown& b, Category c, const std::string& detail = "") {
    const CategoryPart* p = b.find(c, detail);
    return p == nullptr ? 0 : p->bytes;
}

bool estimate_of(const Breakdown& b, Category c, const std::string& detail = "") {
    const CategoryPart* p = b.find(c, detail);
    return p != nullptr && p->estimate;
}

void expect_adds_up(const Breakdown& b) {
    uint64_t sum = 0;
    for (const CategoryPart& p : b.parts) {
        sum += p.bytes;
        EXPECT_NE(p.bytes, 0u);
        EXPECT_LE(p.estimated_bytes, p.bytes);
        EXPECT_EQ(p.estimate, p.estimated_bytes != 0);
        uint64_t site_bytes = 0;
        for (const Site& s : p.sites) site_bytes += s.bytes;
        EXPECT_LE(site_bytes, p.bytes);
    }
    EXPECT_EQ(sum, b.total);
    for (size_t i = 1; i < b.parts.size(); ++i) EXPECT_GE(b.parts[i - 1].bytes, b.parts[i].bytes);
}

// Allocator mode. A segment of 8 MiB; a parameter allocated before step 1 and tagged at step 1's
// end; a buffer allocated before step 1, never tagged; in step 2 an activation, and a gradient
// tagged only at step 2's end; a block of a private pool; other libraries' own cudaMalloc blocks.
const std::string kAllocator = "A 10 1 7f0000000000 8388608 device cudaMalloc 0 - 1 0 0\n"
                               "T 20 1 7f0000000000 1048576 1000000 0 0 1 0 0 -\n"
                               "T 30 1 7f0000100000 1048576 1048576 0 0 1 0 0 -\n"
                               "T 50 1 7f0000200000 2097152 2097152 0 0 1 2 0 -\n"
                               "t 60 1 7f0000200000 0\n"
                               "s 100 1 1 optimizer AdamW\n"
                               "h 100 1 1 step 1\n"
                               "g 1 0 7f0000000000 1000000 parameter fc.weight\n"
                               "k 101 1 1 0 1\n"
                               "T 120 1 7f0000200000 2097152 2097152 0 0 1 2 0 -\n"
                               "T 130 1 7f0000400000 1048576 1048576 0 0 1 0 0 -\n"
                               "T 131 1 7f0000600000 524288 524288 0 0 1 0 0 1.2\n"
                               "A 132 1 7f1000000000 4194304 device cudaMalloc 0 - 2 0 0\n"
                               "A 133 1 7f2000000000 1048576 device cudaMalloc 0 - 3 0 0\n"
                               "A 134 1 7f3000000000 524288 device cudaMalloc 0 - 4 0 0\n"
                               "A 135 1 7f4000000000 262144 device cudaMalloc 0 - 5 0 0\n"
                               "A 136 1 7f5000000000 131072 device cudaMalloc 0 - 6 0 0\n"
                               "t 140 1 7f0000200000 0\n"
                               "s 200 1 2 optimizer AdamW\n"
                               "h 200 1 2 step 2\n"
                               "g 2 0 7f0000000000 1000000 parameter fc.weight\n"
                               "g 2 0 7f0000400000 1048576 gradient fc.weight\n"
                               "k 201 2 2 0 1\n"
                               "Z 300\n";

TEST(Categories, AllocatorModeTagsNameTheBlockForItsWholeLife) {
    Report r = parse(hdr(true) + kAllocator);
    Breakdown b = breakdown_at(r, at_time(r, 136), {});
    expect_adds_up(b);
    EXPECT_EQ(b.total, 8 * MiB + 4 * MiB + 1 * MiB + 512 * KiB + 256 * KiB + 128 * KiB);
    // Tagged at step 1's end and at step 2's end (after this point): the same blocks, exact. The
    // parameter's block holds its request rounded to 512 B; the rest of the block is cache.
    const uint64_t rounded = 1000448;
    EXPECT_EQ(bytes_of(b, Category::Parameter), rounded);
    EXPECT_FALSE(estimate_of(b, Category::Parameter));
    EXPECT_EQ(bytes_of(b, Category::Gradient), 1 * MiB);
    EXPECT_FALSE(estimate_of(b, Category::Gradient));
    // Untagged: allocated in this step -> activation; before it -> other tensor; both estimates.
    EXPECT_EQ(bytes_of(b, Category::Activation), 2 * MiB);
    EXPECT_TRUE(estimate_of(b, Category::Activation));
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kUnnamed), 1 * MiB);
    EXPECT_TRUE(estimate_of(b, Category::OtherTensor, kUnnamed));
    EXPECT_EQ(bytes_of(b, Category::OtherTensor), 0u);
    EXPECT_EQ(bytes_of(b, Category::GraphPool), 512 * KiB);
    // The segment less its live tensors: exact.
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 8 * MiB - 5 * MiB - 512 * KiB + (1 * MiB - rounded));
    EXPECT_FALSE(estimate_of(b, Category::AllocatorCache));
    EXPECT_EQ(bytes_of(b, Category::Nccl), 4 * MiB);
    EXPECT_EQ(bytes_of(b, Category::BlasWorkspace), 1 * MiB);
    EXPECT_EQ(bytes_of(b, Category::Library, "libtransformer_engine.so"), 512 * KiB);
    EXPECT_EQ(bytes_of(b, Category::Other), 256 * KiB + 128 * KiB);
    ASSERT_NE(b.moment, nullptr);
    EXPECT_EQ(b.moment->id, 2u);  // the nearest at or after the point within step 2
    // Sites: the activation's T block site (stack 1, Python stack 2).
    const CategoryPart* act = b.find(Category::Activation);
    ASSERT_EQ(act->sites.size(), 1u);
    EXPECT_EQ(act->sites[0].stack_id, 1u);
    EXPECT_EQ(act->sites[0].python_stack_id, 2u);
    EXPECT_EQ(act->sites[0].bytes, 2 * MiB);
}

TEST(Categories, AllocatorModeWithoutStepsHasNoActivationsByTime) {
    // No s records: "since the step began" has no step; untagged blocks are other tensors.
    Report r = parse(hdr(true) + "A 10 1 7f0000000000 4194304 device cudaMalloc 0 - 1 0 0\n"
                                 "T 20 1 7f0000000000 1048576 1048576 0 0 1 0 0 -\n"
                                 "Z 30\n");
    Breakdown b = breakdown_at(r, r.events.size(), {});
    expect_adds_up(b);
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kUnnamed), 1 * MiB);
    EXPECT_EQ(bytes_of(b, Category::Activation), 0u);
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 3 * MiB);
    EXPECT_EQ(b.moment, nullptr);
}

TEST(Categories, AllocatorModeAutotuneAndCapturedSegments) {
    // A tensor block allocated under inductor's select_algorithm: compile workspace (estimate). A
    // segment owned by a capture: its unallocated bytes are the graph's pool, not the cache.
    Report r = parse(hdr(true) + "C 5 1 1 7fab0000 thread_local -\n"
                                 "A 10 1 7f0000000000 2097152 device cudaMalloc 0 7fab0000 1 1 0\n"
                                 "T 11 1 7f0000000000 1048576 1048576 0 7fab0000 1 0 1 1.1\n"
                                 "c 12 1 1 0 5600aa\n"
                                 "A 20 1 7f1000000000 2097152 device cudaMalloc 0 - 1 0 1\n"
                                 "T 21 1 7f1000000000 1048576 1048576 0 0 1 1 0 -\n"
                                 "Z 30\n");
    Breakdown b = breakdown_at(r, r.events.size(), {});
    expect_adds_up(b);
    EXPECT_EQ(bytes_of(b, Category::GraphPool), 2 * MiB);
    EXPECT_EQ(bytes_of(b, Category::CompileWorkspace), 1 * MiB);
    EXPECT_TRUE(estimate_of(b, Category::CompileWorkspace));
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 1 * MiB);
}

TEST(Categories, AllocatorModeBlasWorkspaceFromTheFunctionName) {
    void* ip = at::cuda::getCUDABlasLtWorkspace();
    auto m = test::module_of(ip);
    ASSERT_TRUE(m.has_value());
    char s[96];
    std::snprintf(s, sizeof s, "S 9 1100 %llx\n", static_cast<unsigned long long>(reinterpret_cast<uint64_t>(ip)));
    Report r = parse(hdr(true) + m->m_record(6) + s +
                     "A 10 1 7f0000000000 4194304 device cudaMalloc 0 - 1 0 0\n"
                     "T 20 1 7f0000000000 1048576 1048576 0 0 9 0 0 -\n"
                     "T 21 1 7f0000100000 1048576 1048576 0 0 1 0 0 -\n"
                     "Z 30\n");
    Breakdown b = breakdown_at(r, r.events.size(), {});
    expect_adds_up(b);
    EXPECT_EQ(bytes_of(b, Category::BlasWorkspace), 1 * MiB);
    EXPECT_FALSE(estimate_of(b, Category::BlasWorkspace));
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kUnnamed), 1 * MiB);
}

// Interposition mode: one segment of 8 MiB, tagged at step 1's end; a second moment (an OOM) with
// PyTorch's allocator blocks.
const std::string kInterposition = "A 10 1 7f0000000000 8388608 device cudaMalloc 0 - 1 0 0\n"
                                   "A 20 1 7f0800000000 2097152 device cudaMalloc 1 - 1 0 0\n"
                                   "s 100 1 1 optimizer AdamW\n"
                                   "h 100 1 1 step 1\n"
                                   "g 1 0 7f0000000000 1048576 parameter fc.weight\n"
                                   "g 1 0 7f0000100000 524288 optimizer_state AdamW.exp_avg\n"
                                   "g 1 0 7f0000780000 1048576 other_tensor -\n"  // runs 512 KiB past the segment's end
                                   "g 1 0 7f0000300000 0 buffer -\n"              // size 0
                                   "g 1 1 7f0800000000 1048576 parameter head.weight\n"
                                   "k 101 1 5 0 1\n"
                                   "A 150 1 7f0010000000 2097152 device cudaMalloc 0 - 1 0 0\n"
                                   "h 160 1 2 oom 1\n"
                                   "g 2 0 7f0000000000 1048576 parameter fc.weight\n"
                                   "d 2 0 7f0000000000 1048576 1000000 active_allocated 7f0000000000 -\n"
                                   "d 2 0 7f0000100000 2097152 2097152 active_allocated 7f0000000000 -\n"
                                   "d 2 0 7f0000300000 5242880 0 inactive 7f0000000000 -\n"
                                   "d 2 0 7f0010000000 2097152 0 inactive 7f0010000000 1.3\n"
                                   "k 161 2 1 4 1\n"
                                   "Z 300\n";

TEST(Categories, InterpositionTagsCoverBytesInsideSegments) {
    Report r = parse(hdr(false) + kInterposition);
    BreakdownOptions o;
    o.device = 0;
    Breakdown b = breakdown_at(r, at_time(r, 100), o);  // at moment 1: nothing happened since
    expect_adds_up(b);
    ASSERT_NE(b.moment, nullptr);
    EXPECT_EQ(b.moment->id, 1u);
    EXPECT_EQ(b.total, 8 * MiB);  // device 0 only
    EXPECT_EQ(bytes_of(b, Category::Parameter), 1 * MiB);
    EXPECT_FALSE(estimate_of(b, Category::Parameter));
    EXPECT_EQ(bytes_of(b, Category::OptimizerState), 512 * KiB);
    EXPECT_EQ(bytes_of(b, Category::OtherTensor), 512 * KiB);  // cut at the segment's end
    EXPECT_EQ(bytes_of(b, Category::Buffer), 0u);
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kNotToldApart), 6 * MiB);
    EXPECT_TRUE(estimate_of(b, Category::OtherTensor, kNotToldApart));
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 0u);

    // Earlier in the same step: the moment at the step's end stands for it, as an estimate.
    Breakdown early = breakdown_at(r, at_time(r, 10), o);
    expect_adds_up(early);
    ASSERT_NE(early.moment, nullptr);
    EXPECT_EQ(early.moment->id, 1u);
    EXPECT_EQ(bytes_of(early, Category::Parameter), 1 * MiB);
    EXPECT_TRUE(estimate_of(early, Category::Parameter));

    // Every device: device 1's segment holds a parameter too.
    Breakdown all = breakdown_at(r, at_time(r, 100), {});
    expect_adds_up(all);
    EXPECT_EQ(all.total, 10 * MiB);
    EXPECT_EQ(bytes_of(all, Category::Parameter), 2 * MiB);
}

TEST(Categories, InterpositionAllocatorBlocksTellTensorsFromCache) {
    Report r = parse(hdr(false) + kInterposition);
    BreakdownOptions o;
    o.device = 0;
    Breakdown b = breakdown_at(r, at_time(r, 160), o);
    expect_adds_up(b);
    ASSERT_NE(b.moment, nullptr);
    EXPECT_EQ(b.moment->id, 2u);
    EXPECT_EQ(b.total, 10 * MiB);
    EXPECT_EQ(bytes_of(b, Category::Parameter), 1000448u);  // the request rounded to 512 B
    EXPECT_FALSE(estimate_of(b, Category::Parameter));
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kUnnamed), 2 * MiB);  // allocated, no tag
    EXPECT_TRUE(estimate_of(b, Category::OtherTensor, kUnnamed));
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 5 * MiB + (1 * MiB - 1000448));
    EXPECT_FALSE(estimate_of(b, Category::AllocatorCache));
    EXPECT_EQ(bytes_of(b, Category::GraphPool), 2 * MiB);  // a private pool's cached block
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kNotToldApart), 0u);
    // The sites of segment bytes are the segment's.
    const CategoryPart* cache = b.find(Category::AllocatorCache);
    ASSERT_EQ(cache->sites.size(), 1u);
    EXPECT_EQ(cache->sites[0].stack_id, 1u);
}

// The shape of a real H200 report (notes/gpu20, insight_train_*): PyTorch did not split a 5 MiB block
// for a 4 MiB parameter (what was left, 1 MiB, was too small to keep) nor a 4 MiB block for a 3 MiB
// gradient. The tags name 4 MiB and 3 MiB; those are the tensors' bytes, at the moment and at a later
// step's peak, and the rest of each block is the allocator's cache.
const std::string kUnsplit = "A 10 1 7f0000000000 20971520 device cudaMalloc 0 - 1 0 0\n"
                             "s 100 1 1 optimizer AdamW\n"
                             "h 100 1 1 step 1\n"
                             "g 1 0 7f0000000000 4194304 parameter mlp.2.weight\n"
                             "g 1 0 7f0000500000 3145728 gradient attn.in_proj_weight.grad\n"
                             "g 1 0 7f0000900000 4194304 optimizer_state AdamW.exp_avg\n"
                             "g 1 0 7f0000d00000 2048 parameter mlp.2.bias\n"
                             "d 1 0 7f0000000000 5242880 4194304 active_allocated 7f0000000000 -\n"
                             "d 1 0 7f0000500000 4194304 3145728 active_allocated 7f0000000000 -\n"
                             "d 1 0 7f0000900000 4194304 4194304 active_allocated 7f0000000000 -\n"
                             "d 1 0 7f0000d00000 2048 2048 active_allocated 7f0000000000 -\n"
                             "d 1 0 7f0000d00800 7337984 0 inactive 7f0000000000 -\n"
                             "k 101 1 4 5 1\n"
                             "s 200 1 2 optimizer AdamW\n"
                             "A 250 1 7f0010000000 2097152 device cudaMalloc 0 - 1 0 0\n"
                             "F 260 1 7f0010000000 0 cudaFree -\n"
                             "s 300 1 3 optimizer AdamW\n"
                             "Z 400\n";

TEST(Categories, InterpositionUnsplitBlocksCountTheirTensorsOnly) {
    Report r = parse(hdr(false) + kUnsplit);
    for (int64_t t : {100, 250}) {  // the moment itself, and the last step's peak (its moment is step 1's)
        SCOPED_TRACE(t);
        Breakdown b = breakdown_at(r, at_time(r, t), {});
        expect_adds_up(b);
        EXPECT_EQ(bytes_of(b, Category::Parameter), 4 * MiB + 2048);
        EXPECT_EQ(bytes_of(b, Category::Gradient), 3 * MiB);
        EXPECT_EQ(bytes_of(b, Category::OptimizerState), 4 * MiB);
        EXPECT_EQ(b.find(Category::Parameter)->blocks, 2u);
        // Segment 20 MiB: 3 tensors' blocks' rest (1 MiB + 1 MiB) and the inactive block are cache.
        EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 2 * MiB + 7337984);
        EXPECT_EQ(estimate_of(b, Category::AllocatorCache), t != 100);
    }
}

TEST(Categories, AllocatorModeUnsplitBlocksCountTheirTensorsOnly) {
    // memguard's allocator keeps a block whole as PyTorch's does; a request of 1000 B is rounded to 1024.
    Report r = parse(hdr(true) + "A 10 1 7f0000000000 20971520 device cudaMalloc 0 - 1 0 0\n"
                                 "T 20 1 7f0000000000 5242880 4194304 0 0 1 0 0 -\n"
                                 "T 21 1 7f0000500000 4194304 3145728 0 0 1 0 0 -\n"
                                 "T 22 1 7f0000900000 1536 1000 0 0 1 0 0 -\n"
                                 "T 23 1 7f0000a00000 2097152 1048576 0 0 1 0 0 1.2\n"
                                 "s 100 1 1 optimizer AdamW\n"
                                 "h 100 1 1 step 1\n"
                                 "g 1 0 7f0000000000 4194304 parameter mlp.2.weight\n"
                                 "g 1 0 7f0000500000 3145728 gradient attn.in_proj_weight.grad\n"
                                 "g 1 0 7f0000900000 1000 parameter mlp.2.bias\n"
                                 "k 101 1 3 0 1\n"
                                 "Z 200\n");
    Breakdown b = breakdown_at(r, r.events.size(), {});
    expect_adds_up(b);
    EXPECT_EQ(bytes_of(b, Category::Parameter), 4 * MiB + 1024);
    EXPECT_FALSE(estimate_of(b, Category::Parameter));
    EXPECT_EQ(bytes_of(b, Category::Gradient), 3 * MiB);
    // A private pool's block: its rest is the pool's too.
    EXPECT_EQ(bytes_of(b, Category::GraphPool), 2 * MiB);
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 20 * MiB - 4 * MiB - 1024 - 3 * MiB - 2 * MiB);
    EXPECT_FALSE(estimate_of(b, Category::AllocatorCache));
}

// The shape of insight_oom_interposition: at an OOM moment the tagged other tensors (alive in Python,
// not saved by a graph the library walked) are exact; allocated blocks no tag names are apart.
TEST(Categories, InterpositionTaggedOtherTensorsStayApartFromUnnamedBlocks) {
    Report r = parse(hdr(false) + "A 10 1 7f0000000000 8388608 device cudaMalloc 0 - 1 0 0\n"
                                  "h 20 1 1 oom 0\n"
                                  "g 1 0 7f0000000000 2097152 other_tensor -\n"
                                  "g 1 0 7f0000200000 1048576 activation saved%20by%20GeluBackward0\n"
                                  "g 1 0 7f0000300000 4 other_tensor -\n"
                                  "d 1 0 7f0000000000 2097152 2097152 active_allocated 7f0000000000 -\n"
                                  "d 1 0 7f0000200000 1048576 1048576 active_allocated 7f0000000000 -\n"
                                  "d 1 0 7f0000300000 512 4 active_allocated 7f0000000000 -\n"
                                  "d 1 0 7f0000300200 3145216 3145216 active_allocated 7f0000000000 -\n"
                                  "d 1 0 7f0000600000 2097152 0 inactive 7f0000000000 -\n"
                                  "k 21 1 3 5 1\n"
                                  "Z 30\n");
    Breakdown b = breakdown_at(r, at_time(r, 20), {});
    expect_adds_up(b);
    EXPECT_EQ(bytes_of(b, Category::OtherTensor), 2 * MiB + 512);
    EXPECT_FALSE(estimate_of(b, Category::OtherTensor));
    EXPECT_EQ(b.find(Category::OtherTensor)->blocks, 2u);
    EXPECT_EQ(bytes_of(b, Category::Activation), 1 * MiB);
    EXPECT_EQ(bytes_of(b, Category::OtherTensor, kUnnamed), 3145216u);
    EXPECT_TRUE(estimate_of(b, Category::OtherTensor, kUnnamed));
    EXPECT_EQ(bytes_of(b, Category::AllocatorCache), 2 * MiB);
}

TEST(Categories, NonTensorCategoriesFromNativeStacks) {
    Report r = parse(hdr(false) + "A 10 1 7f1000000000 4194304 device cudaMalloc 0 - 2 0 0\n"
                                  "A 11 1 7f2000000000 1048576 device cudaMalloc 0 - 3 0 0\n"
                                  "A 12 1 7f3000000000 524288 device cudaMalloc 0 - 4 0 0\n"
                                  "A 13 1 7f4000000000 262144 device cudaMalloc 0 - 5 0 0\n"
                                  "A 14 1 7f5000000000 131072 device cudaMalloc 0 - 6 0 0\n"
                                  "A 15 1 7f6000000000 65536 device cudaMalloc 0 - 5 0 1\n"
                                  "A 16 1 7f7000000000 4096 pinned cudaMallocHost -1 - 2 0 0\n"
                                  "C 20 1 1 7fab0000 relaxed -\n"
                                  "A 21 1 7f8000000000 32768 device cudaMalloc 0 7fab0000 2 1 0\n"
                                  "Z 30\n");
    Breakdown b = breakdown_at(r, r.events.size(), {});
    expect_adds_up(b);
    EXPECT_EQ(b.total, 4 * MiB + 1 * MiB + 512 * KiB + 256 * KiB + 128 * KiB + 64 * KiB + 32 * KiB);
    EXPECT_EQ(bytes_of(b, Category::Nccl), 4 * MiB);
    EXPECT_EQ(bytes_of(b, Category::BlasWorkspace), 1 * MiB);
    EXPECT_EQ(bytes_of(b, Category::Library, "libtransformer_engine.so"), 512 * KiB);
    EXPECT_FALSE(estimate_of(b, Category::Library, "libtransformer_engine.so"));
    EXPECT_EQ(bytes_of(b, Category::Other), 256 * KiB + 128 * KiB);
    EXPECT_EQ(bytes_of(b, Category::CompileWorkspace), 64 * KiB);  // the program, under autotuning
    EXPECT_TRUE(estimate_of(b, Category::CompileWorkspace));
    EXPECT_EQ(bytes_of(b, Category::GraphPool), 32 * KiB);  // owned by a capture, whoever allocated it
}

TEST(Categories, ModuleClasses) {
    bool skip = false;
    EXPECT_EQ(module_class("/usr/lib/libnccl.so.2", skip).allocator, Allocator::Nccl);
    EXPECT_EQ(module_class("/x/libcudnn_ops.so.9", skip).allocator, Allocator::Blas);
    EXPECT_EQ(module_class("/x/libcublas.so.12", skip).allocator, Allocator::Blas);
    EXPECT_EQ(module_class("/x/site-packages/torch/lib/libtorch_cuda.so", skip).allocator, Allocator::Torch);
    EXPECT_EQ(module_class("/x/torch/_C.cpython-312-x86_64-linux-gnu.so", skip).allocator, Allocator::Torch);
    NativeClass lib = module_class("/x/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so", skip);
    EXPECT_EQ(lib.allocator, Allocator::Library);
    EXPECT_EQ(lib.library, "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so");
    EXPECT_FALSE(skip);
    module_class("/usr/lib/x86_64-linux-gnu/libcuda.so.1", skip);
    EXPECT_TRUE(skip);
    module_class("/x/libmemguard.so", skip);
    EXPECT_TRUE(skip);
    EXPECT_TRUE(is_blas_workspace_function("at::cuda::(anonymous namespace)::getNewWorkspace()"));
    EXPECT_FALSE(is_blas_workspace_function("at::cuda::getCurrentCUDABlasHandle()"));
    EXPECT_TRUE(is_autotune_frame(PythonFrame{1, 3, "autotune", "/x/torch/_inductor/runtime/triton_heuristics.py"}));
    EXPECT_FALSE(is_autotune_frame(PythonFrame{1, 3, "benchmark", "/app/bench.py"}));
}

TEST(Categories, ManyPointsInOnePassEqualOneAtATime) {
    for (bool allocator : {true, false}) {
        Report r = parse(hdr(allocator) + (allocator ? kAllocator : kInterposition));
        std::vector<size_t> points;
        for (size_t p = r.events.size() + 1; p-- > 0;) points.push_back(p);  // descending: any order
        points.push_back(3);
        auto many = breakdowns_at(r, points, {});
        ASSERT_EQ(many.size(), points.size());
        for (size_t i = 0; i < points.size(); ++i) {
            Breakdown one = breakdown_at(r, points[i], {});
            expect_adds_up(many[i]);
            EXPECT_EQ(many[i].events_applied, one.events_applied);
            EXPECT_EQ(many[i].total, one.total);
            EXPECT_EQ(many[i].moment, one.moment);
            ASSERT_EQ(many[i].parts.size(), one.parts.size());
            for (size_t k = 0; k < one.parts.size(); ++k) {
                EXPECT_EQ(part_name(many[i].parts[k]), part_name(one.parts[k]));
                EXPECT_EQ(many[i].parts[k].bytes, one.parts[k].bytes);
            }
        }
    }
}

TEST(Categories, OddInputNeverBreaksTheSum) {
    // Moments without k, tags at the top of the address space and of every size, overlapping tags
    // and d blocks, d blocks of no segment, a huge T block, counts that do not match.
    const std::string body = "A 10 1 7f0000000000 8388608 device cudaMalloc 0 - 1 0 0\n"
                             "A 11 1 fffffffffff00000 1048576 device cudaMalloc 0 - 1 0 0\n"
                             "h 20 1 1 api 0\n"
                             "g 1 0 7f0000000000 18446744073709551615 parameter -\n"
                             "g 1 0 7f0000000010 100 gradient -\n"
                             "g 1 0 ffffffffffffffff 18446744073709551615 buffer -\n"
                             "g 1 0 0 0 other_tensor -\n"
                             "d 1 0 7f0000000000 18446744073709551615 0 inactive 7f0000000000 -\n"
                             "d 1 0 7f0000000100 100 100 active_allocated 0 -\n"
                             "d 1 3 10 10 10 active_pending_free 0 9.9\n"
                             "h 30 1 2 oom 0\n"
                             "g 2 0 fffffffffff00000 100000 activation -\n"
                             "k 40 2 99 99 1\n"
                             "Z 50\n";
    for (bool allocator : {true, false}) {
        std::string extra = allocator ? "T 12 1 7f0000000000 18446744073709551615 0 0 0 1 0 0 -\n"
                                        "T 13 1 fffffffffff00000 100000 0 0 0 1 0 0 -\n"
                                      : "";
        Report r = parse(hdr(allocator) + extra + body);
        for (size_t p = 0; p <= r.events.size() + 2; ++p) {
            Breakdown b = breakdown_at(r, p, {});
            expect_adds_up(b);
        }
    }
}

}  // namespace
}  // namespace memguard::report

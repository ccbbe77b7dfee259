// Allocator mode's out-of-memory text in PyTorch's wording (src/allocmode/torch_oom_message.h).
// The expected strings are PyTorch's format (c10/cuda/CUDACachingAllocator.cpp, the OOM branch of
// DeviceCachingAllocator::malloc) filled with the figures by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "allocmode/torch_oom_message.h"

namespace memguard::allocmode {
namespace {

constexpr uint64_t MiB = 1024 * 1024, GiB = 1024 * MiB;

TEST(TorchOomMessage, FormatSizeAsPyTorch) {
    EXPECT_EQ(format_size(0), "0 bytes");
    EXPECT_EQ(format_size(1024), "1024 bytes");  // up to and including 1 KiB: bytes
    EXPECT_EQ(format_size(1025), "1.00 KiB");
    EXPECT_EQ(format_size(MiB), "1024.00 KiB");
    EXPECT_EQ(format_size(MiB + 1), "1.00 MiB");
    EXPECT_EQ(format_size(2 * MiB), "2.00 MiB");
    EXPECT_EQ(format_size(GiB), "1024.00 MiB");
    EXPECT_EQ(format_size(2 * GiB), "2.00 GiB");
    EXPECT_EQ(format_size(150121545728ull), "139.81 GiB");  // an H200's total
    EXPECT_EQ(format_size(uint64_t{1} << 50), "1048576.00 GiB");
}

TEST(TorchOomMessage, PyTorchsSentencesWithTheFigures) {
    TorchOomFigures f;
    f.device = 0;
    f.alloc_size = 2 * GiB;
    f.device_total = 150121545728ull;
    f.device_free = 1320702443ull;  // 1.23 GiB
    f.processes = process_memory_text({{4242, 148ull * GiB + 722 * MiB}}, 4242);
    f.allocated = 130 * GiB;
    f.reserved = 132 * GiB;
    EXPECT_EQ(torch_oom_message(f),
              "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
              "1.23 GiB is free. Including non-PyTorch memory, this process has 148.71 GiB memory in use. Of the "
              "allocated memory 130.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but "
              "unallocated. If reserved but unallocated memory is large try setting "
              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
              "Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html"
              "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)");
}

TEST(TorchOomMessage, OtherProcessesTheFractionAndPrivatePools) {
    EXPECT_EQ(process_memory_text({{7, 3 * GiB}, {9, 512 * MiB}}, 9),
              "Process 7 has 3.00 GiB memory in use. Including non-PyTorch memory, this process has 512.00 MiB "
              "memory in use. ");
    EXPECT_EQ(process_memory_text({}, 9), "");
    TorchOomFigures f;
    f.device = 1;
    f.alloc_size = 20 * MiB;
    f.device_total = 80 * GiB;
    f.device_free = 60 * GiB;
    f.allowed = 4 * GiB;
    f.allocated = 3 * GiB;
    f.reserved = 4 * GiB;
    f.private_pool_cached = 256 * MiB;
    const std::string m = torch_oom_message(f);
    EXPECT_EQ(m.substr(0, m.find(" If reserved")),
              "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 80.00 GiB of which "
              "60.00 GiB is free. 4.00 GiB allowed; Of the allocated memory 3.25 GiB is allocated by PyTorch, with "
              "256.00 MiB allocated in private pools (e.g., CUDA Graphs), and 768.00 MiB is reserved by PyTorch but "
              "unallocated.");
}

TEST(TorchOomMessage, DuringACaptureTheFreeMemoryIsUnknown) {
    TorchOomFigures f;
    f.alloc_size = 2 * MiB;
    f.device_total = 80 * GiB;
    f.free_known = false;
    const std::string m = torch_oom_message(f);
    EXPECT_NE(m.find("GPU 0 has a total capacity of 80.00 GiB of which an unknown amount is free (not asked during a "
                     "CUDA graph capture). Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is "
                     "reserved by PyTorch but unallocated."),
              std::string::npos)
        << m;
    f.device_total = 0;
    EXPECT_NE(torch_oom_message(f).find("has a total capacity of an unknown size of which"), std::string::npos);
}

/// A string field of tests/python/golden/torch_oom_2.11.json (its messages hold no escapes).
std::string golden(const std::string& key) {
    std::ifstream f(std::string(MEMGUARD_SOURCE_DIR) + "/tests/python/golden/torch_oom_2.11.json");
    std::stringstream text;
    text << f.rdbuf();
    const std::string s = text.str();
    const std::string open = "\"" + key + "\": \"";
    const size_t at = s.find(open);
    if (at == std::string::npos) return "(no " + key + " in the golden)";
    const size_t begin = at + open.size();
    return s.substr(begin, s.find('"', begin) - begin);
}

// The messages PyTorch 2.11's own allocator wrote on an H200, rebuilt from their figures: the
// wording is PyTorch's to the byte.
TEST(TorchOomMessage, SameTextAsPyTorch211OnAnH200) {
    TorchOomFigures f;
    f.device = 0;
    f.alloc_size = uint64_t{1} << 50;  // torch.empty(1 << 50)
    f.device_total = 150109880320ull;  // the observer's third argument
    f.device_free = 149433745408ull;   // and its fourth
    f.processes = process_memory_text({{77, 636 * MiB}}, 77);
    f.allocated = 30 * MiB;
    f.reserved = 48 * MiB;
    EXPECT_EQ(torch_oom_message(f), golden("message"));
    f.alloc_size = 20 * GiB;
    f.allowed = static_cast<size_t>(0.05 * 150109880320.0);  // set_per_process_memory_fraction(0.05)
    EXPECT_EQ(torch_oom_message(f), golden("fraction_message"));
}

}  // namespace
}  // namespace memguard::allocmode

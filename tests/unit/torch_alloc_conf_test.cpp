#include <gtest/gtest.h>

#include "allocmode/torch_alloc_conf.h"

using memguard::allocmode::parse_torch_alloc_conf;

TEST(TorchAllocConf, UnsetMeansPyTorchsDefaults) {
    auto c = parse_torch_alloc_conf(nullptr);
    EXPECT_EQ(c.max_split_size, static_cast<size_t>(-1));
    EXPECT_EQ(c.max_non_split_rounding, size_t{20} << 20);
    EXPECT_EQ(c.roundup_power2_divisions, 0u);
    EXPECT_TRUE(c.notes.empty());
}

TEST(TorchAllocConf, AppliesTheSettingsTheAllocatorHas) {
    auto c = parse_torch_alloc_conf("max_split_size_mb:128, roundup_power2_divisions:4,max_non_split_rounding_mb:64,"
                                    "garbage_collection_threshold:0.6");
    EXPECT_EQ(c.max_split_size, size_t{128} << 20);
    EXPECT_EQ(c.roundup_power2_divisions, 4u);
    EXPECT_EQ(c.max_non_split_rounding, size_t{64} << 20);
    EXPECT_EQ(c.garbage_collection_threshold, 0.6);
    EXPECT_TRUE(c.notes.empty());
}

TEST(TorchAllocConf, SaysWhatItDoesNotApply) {
    auto c = parse_torch_alloc_conf(
        "expandable_segments:true,max_split_size_mb:10,roundup_power2_divisions:[256:8,>:4],"
        "garbage_collection_threshold:1.0,backend:cudaMallocAsync");
    EXPECT_EQ(c.max_split_size, static_cast<size_t>(-1));
    EXPECT_EQ(c.roundup_power2_divisions, 0u);
    EXPECT_FALSE(c.expandable_segments.has_value());
    ASSERT_EQ(c.notes.size(), 5u);
    EXPECT_NE(c.notes[0].find("expandable_segments:true: expected True or False"), std::string::npos) << c.notes[0];
    EXPECT_NE(c.notes[1].find("max_split_size_mb:10: expected a number of MB above 20"), std::string::npos)
        << c.notes[1];
    EXPECT_NE(c.notes[2].find("one power of two"), std::string::npos) << c.notes[2];
    EXPECT_NE(c.notes[3].find("garbage_collection_threshold:1.0: expected a number between 0.0 and 1.0"),
              std::string::npos)
        << c.notes[3];
    EXPECT_EQ(c.garbage_collection_threshold, 0.0);
    EXPECT_EQ(parse_torch_alloc_conf("garbage_collection_threshold:0").notes.size(), 1u);
    EXPECT_EQ(parse_torch_alloc_conf("garbage_collection_threshold:0.5x").notes.size(), 1u);
    EXPECT_NE(c.notes[4].find("MEMGUARD_ALLOCATOR=native to use cudaMallocAsync"), std::string::npos) << c.notes[4];
}

// expandable_segments takes PyTorch's two words; the last item wins, as in PyTorch.
TEST(TorchAllocConf, ExpandableSegmentsIsApplied) {
    EXPECT_FALSE(parse_torch_alloc_conf("max_split_size_mb:128").expandable_segments.has_value());
    auto on = parse_torch_alloc_conf("expandable_segments:True");
    EXPECT_EQ(on.expandable_segments, std::optional<bool>(true));
    EXPECT_TRUE(on.notes.empty());
    auto last = parse_torch_alloc_conf("expandable_segments:True, expandable_segments:False");
    EXPECT_EQ(last.expandable_segments, std::optional<bool>(false));
    EXPECT_TRUE(last.notes.empty());
}

// Each note becomes a log line: a control character in the value is escaped, not echoed.
TEST(TorchAllocConf, NotesShowTheItemOnOneLine) {
    auto c = parse_torch_alloc_conf("max_split_size_mb:x\nmemguard: error: forged\x1b[2J");
    ASSERT_EQ(c.notes.size(), 1u);
    EXPECT_NE(c.notes[0].find("max_split_size_mb:x\\nmemguard: error: forged\\x1b[2J: expected"), std::string::npos)
        << c.notes[0];
    for (char ch : c.notes[0]) EXPECT_GE(static_cast<unsigned char>(ch), 0x20);
}

// torch.cuda.memory._set_allocator_settings reads a text over the settings in effect as PyTorch's
// parseArgs does: max_split_size_mb, roundup_power2_divisions and garbage_collection_threshold
// return to their defaults unless the text names them; max_non_split_rounding_mb keeps its value unless it does.
TEST(TorchAllocConf, LaterTextsOverTheSettingsInEffect) {
    using memguard::allocmode::core_settings;
    memguard::alloc::AllocatorConfig c = core_settings(
        parse_torch_alloc_conf("max_split_size_mb:256,roundup_power2_divisions:4,max_non_split_rounding_mb:64"), {});
    EXPECT_EQ(c.max_split_size, size_t{256} << 20);
    EXPECT_EQ(c.roundup_power2_divisions, 4u);
    EXPECT_EQ(c.max_non_split_rounding_size, size_t{64} << 20);
    c = core_settings(parse_torch_alloc_conf("garbage_collection_threshold:0.8"), c);
    EXPECT_EQ(c.max_split_size, SIZE_MAX);
    EXPECT_EQ(c.roundup_power2_divisions, 0u);
    EXPECT_EQ(c.max_non_split_rounding_size, size_t{64} << 20);
    EXPECT_EQ(c.garbage_collection_threshold, 0.8);
    c = core_settings(parse_torch_alloc_conf("max_non_split_rounding_mb:30"), c);
    EXPECT_EQ(c.max_non_split_rounding_size, size_t{30} << 20);
    EXPECT_EQ(c.garbage_collection_threshold, 0.0);
}

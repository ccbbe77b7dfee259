#include <gtest/gtest.h>

#include "common/path_template.h"

using memguard::NameContext;

TEST(PathTemplate, ExpandsEveryEscape) {
    NameContext ctx{4242, "node7", "3", "python3.12"};
    EXPECT_EQ(memguard::expand_template("/out/mg.%r.%p.%h.mgr", ctx), "/out/mg.3.4242.node7.mgr");
    EXPECT_EQ(memguard::expand_template("100%%-%p", ctx), "100%-4242");
    EXPECT_EQ(memguard::expand_template("plain", ctx), "plain");
    EXPECT_EQ(memguard::expand_template("trailing%", ctx), "trailing%");
}

TEST(PathTemplate, DefaultName) {
    NameContext ctx{77, "h", "0", "python3.12"};
    EXPECT_EQ(memguard::default_report_name(ctx), "memguard.python3.12.77.mgr");
    ctx.exe_name = "my app";
    EXPECT_EQ(memguard::default_report_name(ctx), "memguard.my_app.77.mgr");
}

TEST(PathTemplate, RankPrefersRankThenLocalRank) {
    EXPECT_EQ(memguard::rank_from_env("5", "1"), "5");
    EXPECT_EQ(memguard::rank_from_env(nullptr, "1"), "1");
    EXPECT_EQ(memguard::rank_from_env("abc", "2"), "2");
    EXPECT_EQ(memguard::rank_from_env(nullptr, nullptr), "0");
    EXPECT_EQ(memguard::rank_from_env("", ""), "0");
}

TEST(PathTemplate, DefaultNameCarriesTheRankOfADistributedJob) {
    NameContext ctx{77, "h", "3", "python3.12"};
    ctx.ranked = true;
    EXPECT_EQ(memguard::default_report_name(ctx), "memguard.python3.12.rank3.77.mgr");
    EXPECT_TRUE(memguard::rank_in_env("0", nullptr));
    EXPECT_TRUE(memguard::rank_in_env(nullptr, "2"));
    EXPECT_TRUE(memguard::rank_in_env("x", "2"));
    EXPECT_FALSE(memguard::rank_in_env(nullptr, nullptr));
    EXPECT_FALSE(memguard::rank_in_env("", "abc"));
}

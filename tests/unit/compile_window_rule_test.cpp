// The compile window's rule for the program's own gc.freeze() (python/compile_window.h), which the Python
// tests can only exercise on the CPython that the CI runs: 3.11 and 3.13 start with nothing frozen,
// 3.12 with a few hundred of its own tuples (375 in 3.12.1 and 3.12.3).
#include <gtest/gtest.h>

#include "python/compile_window.h"

namespace memguard::python {
namespace {

TEST(CompileWindowRule, NothingFrozenOpensTheWindow) {
    EXPECT_TRUE(compile_window_may_open(0, 0));
    EXPECT_TRUE(compile_window_may_open(0, -1));   // the baseline could not be read
    EXPECT_TRUE(compile_window_may_open(0, 375));  // 3.12 after memguard's first window unfroze
}

TEST(CompileWindowRule, TheInterpretersOwnFrozenObjectsAreNoFreezeOfTheProgram) {
    EXPECT_TRUE(compile_window_may_open(375, 375));  // CPython 3.12 at start-up
}

TEST(CompileWindowRule, AFreezeOfTheProgramKeepsTheWindowShut) {
    EXPECT_FALSE(compile_window_may_open(11238, 0));    // gc.freeze() in the program (3.11, 3.13)
    EXPECT_FALSE(compile_window_may_open(11613, 375));  // the same on 3.12
    EXPECT_FALSE(compile_window_may_open(375, 0));      // a count that was not there at start-up
    EXPECT_FALSE(compile_window_may_open(375, -1));
}

TEST(CompileWindowRule, AFailedCountKeepsTheWindowShut) {
    EXPECT_FALSE(compile_window_may_open(-1, -1));
    EXPECT_FALSE(compile_window_may_open(-1, 375));
}

}  // namespace
}  // namespace memguard::python

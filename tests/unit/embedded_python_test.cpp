// The Python files that libmemguard.so runs are embedded at build time (src/python/embed_text.cmake):
// the embedded text is the file's, byte for byte, so an edit of the file reaches the library.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "python/embedded_interpreter_paths_py.h"
#include "python/embedded_memguard_finder_py.h"
#include "python/embedded_memguard_py.h"
#include "python/embedded_memguard_torch_py.h"

namespace memguard::python {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(EmbeddedPython, TheModuleIsMemguardPy) {
    std::string file = read_file(MEMGUARD_PYTHON_SOURCE_DIR "/memguard.py");
    ASSERT_FALSE(file.empty());
    EXPECT_EQ(std::string(embedded::kMemguardPy), file);
    EXPECT_EQ(sizeof(embedded::kMemguardPy), file.size() + 1);  // no NUL inside
}

TEST(EmbeddedPython, TheImportHookIsMemguardFinderPy) {
    std::string file = read_file(MEMGUARD_PYTHON_SOURCE_DIR "/memguard_finder.py");
    ASSERT_FALSE(file.empty());
    EXPECT_EQ(std::string(embedded::kMemguardFinderPy), file);
    EXPECT_EQ(sizeof(embedded::kMemguardFinderPy), file.size() + 1);
}

TEST(EmbeddedPython, ThePathsAreInterpreterPathsPy) {
    std::string file = read_file(MEMGUARD_PYTHON_SOURCE_DIR "/interpreter_paths.py");
    ASSERT_FALSE(file.empty());
    EXPECT_EQ(std::string(embedded::kInterpreterPathsPy), file);
    EXPECT_EQ(sizeof(embedded::kInterpreterPathsPy), file.size() + 1);
}

TEST(EmbeddedPython, TheTorchSideIsMemguardTorchPy) {
    std::string file = read_file(MEMGUARD_PYTHON_SOURCE_DIR "/memguard_torch.py");
    ASSERT_FALSE(file.empty());
    EXPECT_EQ(std::string(embedded::kMemguardTorchPy), file);
    EXPECT_EQ(sizeof(embedded::kMemguardTorchPy), file.size() + 1);
}

}  // namespace
}  // namespace memguard::python

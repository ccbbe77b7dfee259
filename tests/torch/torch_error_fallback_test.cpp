// memguard's OOM throw in a process without libc10 (and with symbol sets it cannot use): the
// exception is memguard's OutOfMemory, a std::bad_alloc, never a half-built c10 object.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cxxabi.h>
#include <dlfcn.h>
#include <new>
#include <string>

#include "allocmode/torch_error.h"

using memguard::allocmode::OutOfMemory;
using memguard::allocmode::resolve_torch_oom;
using memguard::allocmode::throw_torch_oom;
using memguard::allocmode::TorchOomSymbols;

namespace {

const std::string kMessage = "CUDA out of memory (memguard allocator, test): tried to allocate 42 bytes";

void* lookup_default(const char* name) { return dlsym(RTLD_DEFAULT, name); }

// Stands in for a symbol that must not be called: reaching it ends the test with a crash.
[[noreturn]] void never_called() { std::abort(); }

void* poison() { return reinterpret_cast<void*>(&never_called); }

/// The dynamic type of what throw_torch_oom threw, or "" when it threw OutOfMemory with kMessage.
std::string throw_and_classify(const TorchOomSymbols& s, bool use_own_ctor = true) {
    try {
        throw_torch_oom(s, kMessage, use_own_ctor);
    } catch (const OutOfMemory& e) {
        const std::bad_alloc& as_bad_alloc = e;
        return as_bad_alloc.what() == kMessage ? "" : std::string("OutOfMemory with ") + e.what();
    } catch (...) {
        return abi::__cxa_current_exception_type()->name();
    }
    return "nothing thrown";
}

}  // namespace

TEST(TorchErrorFallback, WithoutLibc10TheOomIsMemguardsBadAlloc) {
    ASSERT_EQ(dlopen("libc10.so", RTLD_LAZY | RTLD_NOLOAD), nullptr) << "this test needs a process without libc10";
    TorchOomSymbols s = resolve_torch_oom(&lookup_default);
    EXPECT_EQ(s.type, nullptr);
    EXPECT_EQ(s.vtable, nullptr);
    EXPECT_EQ(s.base_ctor, nullptr);
    EXPECT_EQ(s.own_ctor, nullptr);
    EXPECT_FALSE(s.usable());
    EXPECT_EQ(throw_and_classify(s), "");
}

TEST(TorchErrorFallback, IncompleteSymbolSetsAreNotUsed) {
    TorchOomSymbols no_type;  // constructors and vtable, but nothing to match a handler with
    no_type.own_ctor = poison();
    no_type.base_ctor = poison();
    no_type.vtable = poison();
    EXPECT_FALSE(no_type.usable());
    EXPECT_EQ(throw_and_classify(no_type), "");

    TorchOomSymbols base_without_vtable;  // an object built by Error's constructor would stay an Error
    base_without_vtable.base_ctor = poison();
    base_without_vtable.type = poison();
    EXPECT_FALSE(base_without_vtable.usable());
    EXPECT_EQ(throw_and_classify(base_without_vtable), "");

    TorchOomSymbols own_only;  // usable, but not when the own constructor is refused
    own_only.own_ctor = poison();
    own_only.type = poison();
    EXPECT_TRUE(own_only.usable());
    EXPECT_EQ(throw_and_classify(own_only, /*use_own_ctor=*/false), "");
}

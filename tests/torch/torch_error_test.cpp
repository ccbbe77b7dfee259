// memguard's OOM throw against PyTorch's real libc10, compiled with torch's own headers: the object
// must be a real c10::OutOfMemoryError, caught the way PyTorch's Python binding catches it
// (`const c10::OutOfMemoryError&`, then what() or the inline virtual what_without_backtrace()).
// Both ways of building it run here: OutOfMemoryError's own exported constructor (torch 2.13 has
// one) and c10::Error's base constructor plus the vtable, what older releases' inline inheriting
// constructor does.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <exception>
#include <functional>
#include <malloc.h>
#include <string>
#include <typeinfo>

#include "allocmode/torch_error.h"

using memguard::allocmode::kTorchErrorReserve;
using memguard::allocmode::OutOfMemory;
using memguard::allocmode::resolve_torch_oom;
using memguard::allocmode::throw_torch_oom;
using memguard::allocmode::TorchOomSymbols;

static_assert(sizeof(c10::OutOfMemoryError) <= kTorchErrorReserve, "the reserve must hold the object");
static_assert(sizeof(c10::OutOfMemoryError) == sizeof(c10::Error), "OutOfMemoryError adds no members");

namespace {

const std::string kMessage = "CUDA out of memory (memguard allocator, test): tried to allocate 42 bytes";

// This test links libc10, so its symbols are in the global scope (under Python, torch loads it
// RTLD_LOCAL and libmemguard.so searches the loaded objects: cuda/real.cpp).
void* lookup_default(const char* name) { return dlsym(RTLD_DEFAULT, name); }

void* lookup_without_typeinfo(const char* name) {
    return std::string(name) == memguard::allocmode::kTorchOomTypeinfo ? nullptr : lookup_default(name);
}

/// The Python exception type PyTorch's binding would raise: the order of CATCH_CORE_ERRORS
/// (torch/csrc/Exceptions.h) for the types in question, then CATCH_ALL_ERRORS' std::exception.
std::string python_type_for(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const c10::IndexError&) {
        return "IndexError";
    } catch (const c10::OutOfMemoryError&) {
        return "torch.OutOfMemoryError";
    } catch (const c10::Error&) {
        return "RuntimeError";
    } catch (const std::exception&) {
        return "RuntimeError (std::exception)";
    }
    return "nothing raised";
}

class TorchError : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override {
        syms_ = resolve_torch_oom(&lookup_default);
        ASSERT_TRUE(syms_.usable());
        if (own() && !syms_.own_ctor) GTEST_SKIP() << "this libc10 has no OutOfMemoryError constructor of its own";
    }
    bool own() const { return GetParam(); }
    [[noreturn]] void throw_oom(const std::string& message = kMessage) { throw_torch_oom(syms_, message, own()); }

    TorchOomSymbols syms_;
};

}  // namespace

TEST(TorchErrorSymbols, Libc10ExportsWhatTheThrowNeeds) {
    TorchOomSymbols s = resolve_torch_oom(&lookup_default);
    EXPECT_NE(s.type, nullptr);
    EXPECT_NE(s.vtable, nullptr);
    EXPECT_NE(s.base_ctor, nullptr);
    EXPECT_TRUE(s.usable());
    ASSERT_NE(s.type, nullptr);
    EXPECT_EQ(*static_cast<const std::type_info*>(s.type), typeid(c10::OutOfMemoryError));
    std::printf("own OutOfMemoryError constructor exported: %s\n", s.own_ctor ? "yes" : "no");
}

TEST_P(TorchError, CaughtAsOutOfMemoryErrorWithMemguardsMessage) {
    try {
        throw_oom();
    } catch (const c10::OutOfMemoryError& e) {
        EXPECT_EQ(e.msg(), kMessage);
        EXPECT_NE(std::string(e.what_without_backtrace()).find(kMessage), std::string::npos)
            << e.what_without_backtrace();
        EXPECT_NE(std::string(e.what()).find(kMessage), std::string::npos) << e.what();
        // The vptr is OutOfMemoryError's, as after a `throw c10::OutOfMemoryError(...)`.
        EXPECT_EQ(typeid(e), typeid(c10::OutOfMemoryError)) << typeid(e).name();
        return;
    } catch (...) {
        FAIL() << "caught as " << abi::__cxa_current_exception_type()->name();
    }
}

TEST_P(TorchError, AlsoCaughtAsErrorAndStdException) {
    try {
        throw_oom();
    } catch (const c10::Error& e) {
        EXPECT_NE(dynamic_cast<const c10::OutOfMemoryError*>(&e), nullptr);
        EXPECT_EQ(e.msg(), kMessage);
    }
    try {
        throw_oom();
    } catch (const std::bad_alloc&) {
        FAIL() << "a c10 error is no std::bad_alloc";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find(kMessage), std::string::npos);
    }
}

TEST_P(TorchError, PythonBindingWouldRaiseTorchOutOfMemoryError) {
    EXPECT_EQ(python_type_for([&] { throw_oom(); }), "torch.OutOfMemoryError");
}

TEST_P(TorchError, CopiesAndRethrowsKeepTheTypeAndMessage) {
    std::exception_ptr saved;
    try {
        throw_oom();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcatch-value"
    } catch (c10::OutOfMemoryError copy) {  // c10's copy constructor: the object is complete
#pragma GCC diagnostic pop
        EXPECT_EQ(copy.msg(), kMessage);
        saved = std::current_exception();
    }
    ASSERT_TRUE(saved);
    EXPECT_EQ(python_type_for([&] { std::rethrow_exception(saved); }), "torch.OutOfMemoryError");
}

TEST_P(TorchError, TheExceptionIsDestroyed) {
    // The destructor handed to __cxa_throw must run c10's: each throw allocates the message twice
    // (msg_, what_without_backtrace_); 200 throws of a 64 KiB message would leak over 25 MB.
    const std::string big(64 << 10, 'x');
    for (int i = 0; i < 20; ++i) python_type_for([&] { throw_oom(big); });  // warm the allocator
    size_t before = mallinfo2().uordblks;
    for (int i = 0; i < 200; ++i) EXPECT_EQ(python_type_for([&] { throw_oom(big); }), "torch.OutOfMemoryError");
    size_t after = mallinfo2().uordblks;
    EXPECT_LT(after, before + (1u << 20)) << "in use before " << before << ", after " << after;
}

INSTANTIATE_TEST_SUITE_P(Ctors, TorchError, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return info.param ? std::string("OwnConstructor")
                                               : std::string("BaseConstructorAndVtable");
                         });

TEST(TorchErrorFallback, WithoutTheTypeinfoTheOomIsMemguardsBadAlloc) {
    TorchOomSymbols s = resolve_torch_oom(&lookup_without_typeinfo);
    EXPECT_FALSE(s.usable());
    EXPECT_EQ(python_type_for([&] { throw_torch_oom(s, kMessage); }), "RuntimeError (std::exception)");
    try {
        throw_torch_oom(s, kMessage);
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.what(), kMessage);
    }
}

#include "allocmode/torch_error.h"

#include <cstdint>
#include <cxxabi.h>
#include <typeinfo>

namespace memguard::allocmode {

const char* const kTorchOomOwnCtor =
    "_ZN3c1016OutOfMemoryErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
const char* const kTorchErrorBaseCtor =
    "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
const char* const kTorchOomVtable = "_ZTVN3c1016OutOfMemoryErrorE";
const char* const kTorchOomTypeinfo = "_ZTIN3c1016OutOfMemoryErrorE";

namespace {

// c10::SourceLocation's layout (c10/util/StringUtil.h): an aggregate of two pointers and a
// uint32_t, trivially copyable, so it is passed by value the same way whichever declaration the
// caller saw.
struct SourceLocation {
    const char* function;
    const char* file;
    std::uint32_t line;
};

// Both constructors take (this, SourceLocation, std::string) by value; the caller owns and
// destroys the string argument (Itanium C++ ABI), as a direct call would.
using ErrorCtor = void (*)(void* self, SourceLocation where, std::string msg);

// The destructor handed to __cxa_throw. c10::Error's destructor is implicit and inline, so no
// library exports it; the object's own vtable has it. std::exception declares its virtual
// destructor first, so slot 0 past the address point is the complete-object destructor (slot 1
// is the deleting one, which would free the exception's storage).
void destroy_via_vtable(void* obj) {
    using Dtor = void (*)(void*);
    Dtor* vptr = *static_cast<Dtor**>(obj);
    vptr[0](obj);
}

}  // namespace

TorchOomSymbols resolve_torch_oom(void* (*lookup)(const char* name)) {
    TorchOomSymbols s;
    s.own_ctor = lookup(kTorchOomOwnCtor);
    s.base_ctor = lookup(kTorchErrorBaseCtor);
    s.vtable = lookup(kTorchOomVtable);
    s.type = lookup(kTorchOomTypeinfo);
    return s;
}

void throw_torch_oom(const TorchOomSymbols& syms, const std::string& message, bool use_own_ctor) {
    if (!syms.usable()) throw OutOfMemory(message);
    bool own = use_own_ctor && syms.own_ctor;
    if (!own && !(syms.base_ctor && syms.vtable)) throw OutOfMemory(message);
    void* obj = abi::__cxa_allocate_exception(kTorchErrorReserve);
    try {
        SourceLocation where{"memguard_alloc", "libmemguard.so", 0};
        if (own) {
            reinterpret_cast<ErrorCtor>(syms.own_ctor)(obj, where, message);
        } else {
            reinterpret_cast<ErrorCtor>(syms.base_ctor)(obj, where, message);
            // What an inheriting constructor does after the base: the vptr moves to the derived
            // class's vtable, whose address point follows offset-to-top and the typeinfo pointer.
            *static_cast<void**>(obj) = static_cast<char*>(syms.vtable) + 2 * sizeof(void*);
        }
    } catch (...) {
        abi::__cxa_free_exception(obj);
        throw;
    }
    abi::__cxa_throw(obj, static_cast<std::type_info*>(syms.type), &destroy_via_vtable);
}

}  // namespace memguard::allocmode

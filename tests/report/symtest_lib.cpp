// Compiled with -O0 -g. Each recorder call is a statement of its own, so the instruction after the call
// (the return address) belongs to the next line: only a lookup at ip - 1 finds the line of the call.
#include "symtest_lib.h"

// Each `g_..._line = __LINE__; call();` stays on one line (the line it names):
// clang-format off

namespace memguard_symtest {

namespace {
int g_known_line = 0;
int g_inlined_line = 0;
int g_outer_line = 0;
void* g_ip = nullptr;

__attribute__((noinline)) void record_caller() { g_ip = __builtin_return_address(0); }
}  // namespace

void* known_function(int n) {
    volatile int acc = n;
    g_known_line = __LINE__; record_caller();
    acc = acc + 1;
    return acc > 0 ? g_ip : nullptr;
}

int known_call_line() { return g_known_line; }

__attribute__((noinline)) void* hidden_function(int n) {
    volatile int acc = n;
    record_caller();
    acc = acc + 2;
    return acc > 0 ? g_ip : nullptr;
}

void* call_hidden_function(int n) { return hidden_function(n); }

__attribute__((always_inline)) inline void inlined_helper(int n) {
    volatile int acc = n;
    g_inlined_line = __LINE__; record_caller();
    acc = acc + 3;
}

void* outer_function(int n) {
    volatile int acc = n;
    g_outer_line = __LINE__; inlined_helper(acc);
    acc = acc + 4;
    return g_ip;
}

int inlined_call_line() { return g_inlined_line; }
int outer_call_line() { return g_outer_line; }

}  // namespace memguard_symtest
// clang-format on

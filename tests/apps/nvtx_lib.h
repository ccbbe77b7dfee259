// Two shared libraries (libmg_nvtx_a.so, libmg_nvtx_b.so), each compiled with the NVTX v3 headers,
// so each has its own NVTX globals and initializes NVTX separately, as libtorch, NCCL and cuDNN do.
// The program (nvtx_phases.cpp) is a third NVTX copy. All calls are plain NVTX API calls.
#pragma once

#include <cstdint>

extern "C" {
// libmg_nvtx_a.so: ASCII strings, the default domain.
int nvtx_a_push(const char* message);
int nvtx_a_pop();
uint64_t nvtx_a_start(const char* message);
void nvtx_a_end(uint64_t id);
void nvtx_a_mark(const char* message);

// libmg_nvtx_b.so: wide strings, event attributes, a named domain and registered strings.
int nvtx_b_push_w(const wchar_t* message);
int nvtx_b_pop();
uint64_t nvtx_b_start_registered(const char* domain, const char* message);
void nvtx_b_end_in_domain(const char* domain, uint64_t id);
int nvtx_b_domain_push(const char* domain, const char* message);
int nvtx_b_domain_pop(const char* domain);
void nvtx_b_domain_mark(const char* domain, const char* message);
void nvtx_b_mark_w(const wchar_t* message);
}

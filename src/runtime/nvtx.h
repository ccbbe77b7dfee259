// NVTX v3 injection (nvtx.cpp): NVTX ranges become phases, NVTX marks become marks.
#pragma once

namespace memguard::runtime {

/// From the library constructor: names libmemguard.so in NVTX_INJECTION64_PATH when the variable
/// is unset; when it names another tool (Nsight Systems, ...), logs one info line and stays out.
/// `enabled`: MEMGUARD_ENABLE and MEMGUARD_NVTX.
void register_nvtx_injection(bool enabled);

/// How many NVTX copies (libraries with their own NVTX globals) attached so far.
int nvtx_instances();

}  // namespace memguard::runtime

// Inspection functions of the fake CUDA driver (tests/fake_cuda/libcuda.so.1). They exist only in
// the fake, never in the real libcuda, so only test programs may call them.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

/// Bytes of device address space reserved (cuMemAddressReserve) and not freed.
size_t fakecu_reserved_bytes(void);
/// Bytes mapped now (sum of the sizes of live cuMemMap ranges).
size_t fakecu_mapped_bytes(void);
/// Bytes of physical memory alive now: handles created and not yet (released and unmapped).
size_t fakecu_physical_bytes(void);
/// Bytes of device memory live from cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocPitch_v2 and the
/// stream-ordered allocations.
size_t fakecu_device_bytes(void);
/// Number of cuGetProcAddress / cuGetProcAddress_v2 calls that got past argument checks.
uint64_t fakecu_lookup_count(void);
}

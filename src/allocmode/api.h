// Allocator mode's exported functions (api.cpp), declared for the library's own use (their
// addresses go to PyTorch, torch_bridge.cpp) and for programs that call them as PyTorch does.
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>
#include <functional>
#include <utility>

extern "C" {
__attribute__((visibility("default"))) void* memguard_alloc(size_t size, int device, cudaStream_t stream);
__attribute__((visibility("default"))) void memguard_free(void* ptr, size_t size, int device, cudaStream_t stream);
__attribute__((visibility("default"))) void memguard_allocator_init(int device_count);
__attribute__((visibility("default"))) void memguard_allocator_empty_cache(void);
__attribute__((visibility("default"))) void memguard_allocator_memory_fraction(double fraction, int device);
__attribute__((visibility("default"))) void memguard_allocator_record_stream(void* ptr, cudaStream_t stream);
__attribute__((visibility("default"))) void memguard_allocator_begin_pool(
    int device, std::pair<unsigned long long, unsigned long long> id, std::function<bool(cudaStream_t)> filter);
__attribute__((visibility("default"))) void memguard_allocator_end_pool(
    int device, std::pair<unsigned long long, unsigned long long> id);
__attribute__((visibility("default"))) void memguard_allocator_release_pool(
    int device, std::pair<unsigned long long, unsigned long long> id);
}

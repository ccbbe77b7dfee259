// The rules of docs/categories.md that look at one block's stacks: which library its native stack
// allocated it from (module file names of the M records: no symbolization), whether PyTorch's cuBLAS
// workspace functions are on it (function names from ELF symbol tables), whether its Python stack
// runs inductor's autotuning. Internal to the category engine (categories.cpp); cached per stack.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "report/report.h"
#include "report/symbolizer.h"

namespace memguard::report {

/// Who allocated a block, from its native stack's innermost frame that is not memguard's or CUDA's.
enum class Allocator : uint8_t {
    Unknown,  // no stack, or no frame in a module: nothing to go by
    Torch,    // PyTorch (libc10_cuda, libtorch*, torch's own extension modules): a segment of tensors
    Nccl,     // libnccl
    Blas,     // libcublas, libcublasLt, libcudnn*
    Library,  // another shared library: `library` names it
    Program,  // the executable itself (not a shared library)
};

struct NativeClass {
    Allocator allocator = Allocator::Unknown;
    std::string library;  // Library: the module's file name
};

/// The class of one module file, by its name (exposed for the tests). `skip` is set for memguard's
/// and CUDA's own modules (libmemguard, libcudart, libcuda), which every allocation passes through.
NativeClass module_class(const std::string& path, bool& skip);

/// True when a Python frame is inductor's autotuning or benchmarking (compile_workspace).
bool is_autotune_frame(const PythonFrame& f);

/// True when a demangled function name is PyTorch's cuBLAS/cuBLASLt workspace allocation.
bool is_blas_workspace_function(const std::string& function);

class StackRules {
public:
    StackRules(const Report& r, const SymbolizerOptions& options);

    const NativeClass& native(uint32_t stack_id);
    bool autotune(uint32_t python_stack_id);
    /// Allocator mode's tensor blocks: a frame of the native stack is a cuBLAS workspace function.
    bool blas_workspace(uint32_t stack_id);

private:
    const Report& r_;
    SymbolizerOptions options_;
    std::unique_ptr<Symbolizer> sym_;  // made on first use: only the blas rule reads symbols
    std::unordered_map<uint32_t, NativeClass> native_;
    std::unordered_map<uint32_t, bool> autotune_;
    std::unordered_map<uint32_t, bool> blas_;
};

}  // namespace memguard::report

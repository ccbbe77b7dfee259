#include "report/category_rules.h"

#include <algorithm>
#include <memory>

namespace memguard::report {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The frames of a native stack looked at for the workspace functions: PyTorch calls its caching
/// allocator a few frames below getCUDABlasLtWorkspace, under memguard's and the allocator's own.
constexpr size_t kBlasFrames = 24;

}  // namespace

NativeClass module_class(const std::string& path, bool& skip) {
    const std::string name = base_name(path);
    skip = false;
    NativeClass c;
    // Order matters: libcudnn and libcudart both start with "libcuda".
    if (starts_with(name, "libnccl")) {
        c.allocator = Allocator::Nccl;
    } else if (starts_with(name, "libcublas") || starts_with(name, "libcudnn")) {
        c.allocator = Allocator::Blas;
    } else if (starts_with(name, "libmemguard") || starts_with(name, "libcudart") || starts_with(name, "libcuda.")) {
        skip = true;
    } else if (starts_with(name, "libc10") || starts_with(name, "libtorch") || starts_with(name, "libshm") ||
               starts_with(name, "_C.") || has(path, "/torch/")) {
        c.allocator = Allocator::Torch;
    } else if (has(name, ".so")) {
        c.allocator = Allocator::Library;
        c.library = name;
    } else {
        c.allocator = Allocator::Program;
    }
    return c;
}

bool is_autotune_frame(const PythonFrame& f) {
    if (!has(f.filename, "torch/_inductor")) return false;
    for (const char* word : {"autotune", "select_algorithm", "benchmark"}) {
        if (has(f.filename, word) || has(f.function, word)) return true;
    }
    return false;
}

bool is_blas_workspace_function(const std::string& function) {
    return has(function, "getNewWorkspace") || has(function, "getCUDABlasLtWorkspace");
}

StackRules::StackRules(const Report& r, const SymbolizerOptions& options) : r_(r), options_(options) {
    options_.addr2line.clear();  // function names from the symbol tables are enough: no subprocess
}

const NativeClass& StackRules::native(uint32_t stack_id) {
    auto found = native_.find(stack_id);
    if (found != native_.end()) return found->second;
    NativeClass c;
    auto it = r_.stacks.find(stack_id);
    if (it != r_.stacks.end()) {
        // The module holding an ip, as the symbolizer finds it (the latest of the modules known).
        const Stack& s = it->second;
        for (uint64_t ip : s.ips) {
            const Module* m = nullptr;
            const std::vector<Module>& mods = r_.modules;
            for (size_t i = std::min(s.modules_known, mods.size()); i-- > 0 && m == nullptr;) {
                if (mods[i].lo <= ip && ip < mods[i].hi) m = &mods[i];
            }
            for (size_t i = mods.size(); i-- > 0 && m == nullptr;) {
                if (mods[i].lo <= ip && ip < mods[i].hi) m = &mods[i];
            }
            if (m == nullptr) continue;  // JIT code, or a module memguard did not see: look further out
            bool skip = false;
            NativeClass mc = module_class(m->path, skip);
            if (skip) continue;
            c = std::move(mc);
            break;
        }
    }
    return native_.emplace(stack_id, std::move(c)).first->second;
}

bool StackRules::autotune(uint32_t python_stack_id) {
    auto found = autotune_.find(python_stack_id);
    if (found != autotune_.end()) return found->second;
    bool yes = false;
    auto it = r_.python_stacks.find(python_stack_id);
    if (it != r_.python_stacks.end()) {
        for (uint32_t id : it->second.frames) {
            auto f = r_.python_frames.find(id);
            if (f != r_.python_frames.end() && is_autotune_frame(f->second)) {
                yes = true;
                break;
            }
        }
    }
    autotune_.emplace(python_stack_id, yes);
    return yes;
}

bool StackRules::blas_workspace(uint32_t stack_id) {
    auto found = blas_.find(stack_id);
    if (found != blas_.end()) return found->second;
    bool yes = false;
    auto it = r_.stacks.find(stack_id);
    if (it != r_.stacks.end()) {
        if (!sym_) sym_ = std::make_unique<Symbolizer>(r_, options_);
        for (const Frame& f : sym_->frames(it->second, kBlasFrames)) {
            if (is_blas_workspace_function(f.function)) {
                yes = true;
                break;
            }
        }
        sym_->take_warnings();  // a missing module file only means no names: the rule does not apply
    }
    blas_.emplace(stack_id, yes);
    return yes;
}

}  // namespace memguard::report

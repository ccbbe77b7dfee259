// The report's vocabulary (docs/report-format.md): the values a record names by a word, each
// defined once, with the names the writer writes and the reader parses. Standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace memguard::format {

/// A word-valued field's names, indexed by the enum's value.
template <class E, size_t N>
struct Names {
    std::string_view names[N];

    constexpr std::string_view operator[](E e) const noexcept {
        const auto i = static_cast<size_t>(e);
        return i < N ? names[i] : std::string_view("unknown");
    }
    /// The value named `s`; false when no value has that name.
    constexpr bool parse(std::string_view s, E* out) const noexcept {
        for (size_t i = 0; i < N; ++i) {
            if (names[i] == s) {
                *out = static_cast<E>(i);
                return true;
            }
        }
        return false;
    }
    static constexpr size_t size() noexcept { return N; }
};

/// What kind of memory a block is (A and E records).
enum class Kind : uint8_t { Device, Async, Managed, Pinned };
inline constexpr Names<Kind, 4> kKindNames{{"device", "async", "managed", "pinned"}};
constexpr std::string_view name_of(Kind k) noexcept { return kKindNames[k]; }
inline const char* kind_name(Kind k) noexcept { return name_of(k).data(); }
/// True for kinds that occupy GPU memory (device, async, managed); pinned is host memory.
constexpr bool is_gpu(Kind k) noexcept { return k == Kind::Device || k == Kind::Async || k == Kind::Managed; }

/// The CUDA functions whose calls are recorded: the `api` field of A, E, F and W unsafe_call.
/// Driver functions (minor 3) go by their base name.
enum class Api : uint8_t {
    cudaMalloc,
    cudaFree,
    cudaMallocAsync,
    cudaFreeAsync,
    cudaMallocFromPoolAsync,
    cudaMallocManaged,
    cudaMallocPitch,
    cudaMallocHost,
    cudaHostAlloc,
    cudaFreeHost,
    cuMemAlloc,
    cuMemFree,
    cuMemAllocAsync,
    cuMemFreeAsync,
    cuMemAllocFromPoolAsync,
    cuMemAllocManaged,
    cuMemAllocPitch,
    cuMemHostAlloc,
    cuMemFreeHost,
    cuMemAllocHost,
};
inline constexpr Names<Api, 20> kApiNames{{
    "cudaMalloc",        "cudaFree",        "cudaMallocAsync", "cudaFreeAsync",  "cudaMallocFromPoolAsync",
    "cudaMallocManaged", "cudaMallocPitch", "cudaMallocHost",  "cudaHostAlloc",  "cudaFreeHost",
    "cuMemAlloc",        "cuMemFree",       "cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync",
    "cuMemAllocManaged", "cuMemAllocPitch", "cuMemHostAlloc",  "cuMemFreeHost",  "cuMemAllocHost",
}};
constexpr std::string_view name_of(Api a) noexcept { return kApiNames[a]; }
inline const char* api_name(Api a) noexcept { return name_of(a).data(); }
/// The `api` of an F written for a block that a path memguard does not see released.
inline constexpr std::string_view kUnseenApi = "unseen";

/// CUDA's stream capture (interaction) modes, with cudaStreamCaptureMode's values (C, W).
enum class CaptureMode : int { Global = 0, ThreadLocal = 1, Relaxed = 2 };
inline constexpr Names<CaptureMode, 3> kCaptureModeNames{{"global", "thread_local", "relaxed"}};
constexpr std::string_view name_of(CaptureMode m) noexcept { return kCaptureModeNames[m]; }
inline const char* capture_mode_name(CaptureMode m) noexcept { return name_of(m).data(); }

/// Where a phase or a mark came from (B, J): the C API or the Python module, an NVTX push/pop
/// range (per thread), an NVTX start/end range (process-wide).
enum class PhaseSource : uint8_t { Api, Nvtx, NvtxRange };
inline constexpr Names<PhaseSource, 3> kPhaseSourceNames{{"api", "nvtx", "nvtx_range"}};
constexpr std::string_view name_of(PhaseSource s) noexcept { return kPhaseSourceNames[s]; }
inline const char* phase_source_name(PhaseSource s) noexcept { return name_of(s).data(); }

/// What started a garbage collection (Y).
/// Who ran a garbage collection (Y): CPython on its own, the program (gc.collect()), or memguard:
/// `memguard` after a compile (the name of minor 2, kept), `recompute` after a checkpointed
/// region's backward, `step` at a step end (minor 9).
enum class GcTrigger : uint8_t { Automatic, Explicit, Memguard, Recompute, Step };
inline constexpr Names<GcTrigger, 5> kGcTriggerNames{{"automatic", "explicit", "memguard", "recompute", "step"}};
constexpr size_t kTriggerCount = kGcTriggerNames.size();
constexpr std::string_view name_of(GcTrigger t) noexcept { return kGcTriggerNames[t]; }
inline const char* trigger_name(GcTrigger t) noexcept { return name_of(t).data(); }

/// memguard's own collections: the triggers the budget and the explanations are for.
constexpr bool is_memguards(GcTrigger t) noexcept {
    return t == GcTrigger::Memguard || t == GcTrigger::Recompute || t == GcTrigger::Step;
}

/// What a group of a collection's garbage is (u, minor 9): frames (by function and file:line),
/// autograd.Function contexts, autograd nodes' Python objects, dynamo/fx/inductor objects,
/// closures (functions with cells, and cells), exceptions, tracebacks, tensors, and the plain
/// type counts (`type`: the most frequent types, whatever their group).
enum class GarbageKind : uint8_t {
    Frame,
    AutogradFunction,
    AutogradNode,
    Dynamo,
    Closure,
    Exception,
    Traceback,
    Tensor,
    Type,
};
inline constexpr Names<GarbageKind, 9> kGarbageKindNames{
    {"frame", "autograd_function", "autograd_node", "dynamo", "closure", "exception", "traceback", "tensor", "type"}};
constexpr std::string_view name_of(GarbageKind k) noexcept { return kGarbageKindNames[k]; }

/// How the garbage held a CUDA storage (y, minor 9): a tensor object of the garbage, or a tensor
/// saved for backward by an autograd.Function context of the garbage (not a Python object).
enum class HeldHow : uint8_t { Tensor, Saved };
inline constexpr Names<HeldHow, 2> kHeldHowNames{{"tensor", "saved"}};
constexpr std::string_view name_of(HeldHow h) noexcept { return kHeldHowNames[h]; }

/// Which boundary of a capture a W warmup_retention was written at.
enum class CapturePhase : uint8_t { Begin, End };
inline constexpr Names<CapturePhase, 2> kCapturePhaseNames{{"begin", "end"}};
constexpr std::string_view name_of(CapturePhase p) noexcept { return kCapturePhaseNames[p]; }
inline const char* capture_phase_name(CapturePhase p) noexcept { return name_of(p).data(); }

/// What allocator mode tried before giving up on an allocation (O): nothing (a capture was in
/// progress), emptying its cache, or that and one full gc.collect().
enum class Rescue : uint8_t { None, Cache, Gc };
inline constexpr Names<Rescue, 3> kRescueNames{{"none", "cache", "gc"}};
constexpr std::string_view name_of(Rescue r) noexcept { return kRescueNames[r]; }
inline const char* rescue_name(Rescue r) noexcept { return name_of(r).data(); }

// --- minor 8: steps, categories, out-of-memory context ---------------------------------------------

/// What ended a training step (s): an optimizer's step() (PyTorch's global optimizer step hooks) or
/// memguard.step().
enum class StepSource : uint8_t { Optimizer, Api };
inline constexpr Names<StepSource, 2> kStepSourceNames{{"optimizer", "api"}};
constexpr std::string_view name_of(StepSource s) noexcept { return kStepSourceNames[s]; }

/// Why the Python hook looked at the live tensors (h): a step ended, an out-of-memory, memguard's API.
enum class MomentReason : uint8_t { Step, Oom, Api };
inline constexpr Names<MomentReason, 3> kMomentReasonNames{{"step", "oom", "api"}};
constexpr std::string_view name_of(MomentReason r) noexcept { return kMomentReasonNames[r]; }

/// What GPU memory holds. A tensor's storage gets one of the tensor categories (parameter to
/// other_tensor) in a g record; the CLI decides the others from the blocks' stacks, pools and the
/// allocator's state (docs/categories.md).
enum class Category : uint8_t {
    Parameter,         // a parameter of a live nn.Module, or one an optimizer updates
    Gradient,          // the .grad of a parameter
    NonParamGradient,  // the .grad of a tensor that is not a parameter
    OptimizerState,    // a tensor in an optimizer's state
    Buffer,            // a module's buffer (running statistics, caches registered as buffers)
    Activation,        // a tensor saved for backward by an autograd graph
    OtherTensor,       // any other live tensor
    GraphPool,         // a CUDA graph's private pool
    CompileWorkspace,  // compile and autotune workspaces
    Nccl,              // NCCL's buffers
    BlasWorkspace,     // cuBLAS/cuBLASLt/cuDNN workspaces
    Library,           // another library's own allocations
    AllocatorCache,    // reserved by a caching allocator, not allocated
    Other,             // GPU memory nothing above explains
};
inline constexpr Names<Category, 14> kCategoryNames{{
    "parameter",
    "gradient",
    "nonparam_gradient",
    "optimizer_state",
    "buffer",
    "activation",
    "other_tensor",
    "graph_pool",
    "compile_workspace",
    "nccl",
    "blas_workspace",
    "library",
    "allocator_cache",
    "other",
}};
constexpr std::string_view name_of(Category c) noexcept { return kCategoryNames[c]; }
/// True for the categories a g record may give a tensor's storage.
constexpr bool is_tensor_category(Category c) noexcept { return c <= Category::OtherTensor; }

/// A block's state in PyTorch's allocator snapshot (d), in torch.cuda.memory._snapshot()'s words.
enum class BlockState : uint8_t { Allocated, PendingFree, Inactive };
inline constexpr Names<BlockState, 3> kBlockStateNames{{"active_allocated", "active_pending_free", "inactive"}};
constexpr std::string_view name_of(BlockState s) noexcept { return kBlockStateNames[s]; }

/// Who saw an out-of-memory (x): PyTorch's allocator (its OOM observer), a failed CUDA allocation
/// call, memguard's allocator (allocator mode).
enum class OomSource : uint8_t { Torch, Cuda, Allocator };
inline constexpr Names<OomSource, 3> kOomSourceNames{{"torch", "cuda", "allocator"}};
constexpr std::string_view name_of(OomSource s) noexcept { return kOomSourceNames[s]; }
/// What an interpreter path is (e, minor 8): the Python hook writes each once, for the report's
/// user-frame rule (report/user_frame.h).
enum class PathKind : uint8_t { Stdlib, Site, Prefix, Torch, InductorCache, Memguard };
inline constexpr Names<PathKind, 6> kPathKindNames{{"stdlib", "site", "prefix", "torch", "inductor_cache", "memguard"}};
constexpr std::string_view name_of(PathKind k) noexcept { return kPathKindNames[k]; }

// The hazard kinds are the keys of the W records (format/records.h: UnsafeCall, FreeLiveGraph,
// WarmupRetention).

/// The major version in the header line (`MEMGUARD-REPORT 1`). The minor is the record table's
/// (format/records.h: kFormatMinor).
constexpr int kFormatVersion = 1;

// Bounds (docs/report-format.md, "Bounds"): what a writer never writes and a reader refuses.
/// Device ordinals: -1 (pinned host memory, physical memory located elsewhere) to kMaxDevice.
constexpr int kMaxDevice = 1023;
/// Times and durations lie within -kMaxTimeNs..kMaxTimeNs (2^62 - 1 ns, 146 years): the difference
/// of two of them, or one plus a wall-clock origin (t0_unix_ns), fits in 64 bits.
constexpr int64_t kMaxTimeNs = (int64_t{1} << 62) - 1;

}  // namespace memguard::format

#include "allocmode/device_processes.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mutex>

#include "cuda/real.h"

namespace memguard::allocmode {

namespace {

// NVML's ABI (nvml.h), declared here: memguard builds without NVML's headers.
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;
struct NvmlProcessInfoV1 {  // nvmlProcessInfo_v1_t, what the unversioned query fills
    unsigned int pid;
    unsigned long long usedGpuMemory;
};

struct Nvml {
    int (*init)() = nullptr;
    int (*by_pci)(const char*, NvmlDevice*) = nullptr;
    int (*processes)(NvmlDevice, unsigned int*, NvmlProcessInfoV1*) = nullptr;
    bool ready = false;
};

cuda::RealFunction<cudaError_t (*)(char*, int, int)> r_pci_bus_id("cudaDeviceGetPCIBusId");
cuda::RealFunction<cudaError_t (*)()> r_get_last_error("cudaGetLastError");

/// NVML opened and initialized once (the first failure that asks); never closed.
const Nvml& nvml() {
    static std::mutex mu;
    static Nvml n;
    static bool tried = false;
    std::lock_guard<std::mutex> lock(mu);
    if (tried) return n;
    tried = true;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return n;
    n.init = reinterpret_cast<int (*)()>(cuda::real_dlsym(h, "nvmlInit_v2"));
    n.by_pci = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(
        cuda::real_dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.processes = reinterpret_cast<int (*)(NvmlDevice, unsigned int*, NvmlProcessInfoV1*)>(
        cuda::real_dlsym(h, "nvmlDeviceGetComputeRunningProcesses"));
    n.ready = n.init && n.by_pci && n.processes && n.init() == kNvmlSuccess;
    return n;
}

}  // namespace

bool device_processes(int device, std::vector<DeviceProcess>* out) {
    out->clear();
    auto pci = r_pci_bus_id.get();
    char bus_id[64] = {};
    if (!pci) return false;
    if (pci(bus_id, sizeof bus_id, device) != cudaSuccess) {
        // Not left as the thread's last error, which PyTorch reads after its own calls.
        if (auto clear = r_get_last_error.get()) (void)clear();
        return false;
    }
    const Nvml& n = nvml();
    NvmlDevice handle = nullptr;
    if (!n.ready || n.by_pci(bus_id, &handle) != kNvmlSuccess) return false;
    std::vector<NvmlProcessInfoV1> procs(8);
    unsigned int count = static_cast<unsigned int>(procs.size());
    int r = 0;
    while ((r = n.processes(handle, &count, procs.data())) == kNvmlInsufficientSize && count > procs.size()) {
        procs.resize(count);
    }
    if (r != kNvmlSuccess) return false;
    for (unsigned int i = 0; i < count && i < procs.size(); ++i) out->push_back({procs[i].pid, procs[i].usedGpuMemory});
    return true;
}

}  // namespace memguard::allocmode

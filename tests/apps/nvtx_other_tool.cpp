// A stand-in for another NVTX tool (Nsight Systems): an injection library that announces itself on
// stderr and takes nvtxRangePushA. When NVTX_INJECTION64_PATH names it, memguard stays out.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

namespace {
int other_push(const char* message) {
    std::fprintf(stderr, "other-tool push %s\n", message ? message : "");
    return 0;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    auto* etbl = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
    NvtxFunctionTable table = nullptr;
    unsigned int size = 0;
    if (!etbl || !etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) return 0;
    if (NVTX_CBID_CORE_RangePushA < size && table[NVTX_CBID_CORE_RangePushA]) {
        *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&other_push);
    }
    std::fprintf(stderr, "other-tool attached\n");
    return 1;
}

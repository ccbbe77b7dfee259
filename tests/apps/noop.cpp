// Links libcudart and uses it, but never allocates: a process like this leaves no report.
// cudaFree(nullptr) is how many programs initialize the runtime; it frees nothing.
#include "app_common.h"

int main() {
    app::init_log();
    int devices = 0;
    app::expect("cudaGetDeviceCount", cudaGetDeviceCount(&devices), cudaSuccess);
    int version = 0;
    app::expect("cudaRuntimeGetVersion", cudaRuntimeGetVersion(&version), cudaSuccess);
    app::expect("cudaDriverGetVersion", cudaDriverGetVersion(&version), cudaSuccess);
    app::expect("cudaSetDevice", cudaSetDevice(0), cudaSuccess);
    app::expect("cudaFree(nullptr)", cudaFree(nullptr), cudaSuccess);
    app::expect("cudaDeviceSynchronize", cudaDeviceSynchronize(), cudaSuccess);
    std::printf("noop: %d device(s), no allocation\n", devices);
    return 0;
}

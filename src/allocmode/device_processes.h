// The processes using a device and their memory, from NVML, for PyTorch's out-of-memory message
// ("Including non-PyTorch memory, this process has ... memory in use."). NVML is opened the way
// PyTorch opens it (dlopen of libnvidia-ml.so.1, its unversioned v1 process query), at the first
// failure that asks, never before; a process without NVML gets an empty list, and PyTorch's
// message then omits the sentence, as PyTorch's own does.
#pragma once

#include <vector>

#include "allocmode/torch_oom_message.h"

namespace memguard::allocmode {

/// NVML's compute processes on the CUDA runtime's `device` (matched by PCI bus id); false, with
/// `out` empty, when NVML or the device cannot be asked.
bool device_processes(int device, std::vector<DeviceProcess>* out);

}  // namespace memguard::allocmode

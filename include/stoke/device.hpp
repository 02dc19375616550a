// Choosing the device to compute on. The policy is a pure function over a
// list of device descriptions, so every case is testable without a GPU.
#pragma once

#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke {

struct DeviceSelection {
  bool use_gpu = false;
  std::vector<int> gpus;              // chosen CUDA ordinals; the first is the primary device
  std::string reason;                 // one line: why this choice
  std::vector<std::string> warnings;  // e.g. "no CUDA device: running on CPU"
};

// auto: discrete before integrated, then most total memory, then highest
// compute capability, then lowest index; no GPU -> CPU with one warning.
// cpu: the CPU. A list: exactly those devices, in that order; an index that
// does not exist is a ConfigError listing the devices that do.
// `no_device_reason` (e.g. "cudaGetDeviceCount: insufficient driver") is
// quoted in the fallback warning and the error.
STOKE_API DeviceSelection select_device(const DeviceRequest& request,
                                        const std::vector<GpuInfo>& gpus,
                                        const std::string& no_device_reason = {});

// Convenience: select from the config and a system query, and log the warnings.
STOKE_API DeviceSelection select_device(const Config& config, const SystemInfo& system);

STOKE_API std::string describe(const DeviceSelection& selection, const std::vector<GpuInfo>& gpus);

}  // namespace stoke

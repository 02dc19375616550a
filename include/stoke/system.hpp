// What the machine has: CPU cores, NUMA nodes, SIMD level, memory, and the GPUs
// the CUDA plugin can see with their driver/runtime/library versions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoke/export.hpp"

namespace stoke {

// Instruction-set levels stoke's pixel and elementwise kernels are built for,
// in increasing order.
enum class SimdLevel { kScalar = 0, kSse4 = 1, kAvx2 = 2, kAvx512 = 3 };

STOKE_API const char* to_string(SimdLevel level) noexcept;

struct CpuInfo {
  std::string model;
  int physical_cores = 1;  // distinct cores this process may run on
  int logical_cores = 1;   // hardware threads this process may run on
  int numa_nodes = 1;
  SimdLevel simd = SimdLevel::kScalar;  // best level this CPU supports
  std::uint64_t total_memory = 0;       // bytes
  std::uint64_t available_memory = 0;   // bytes (MemAvailable)
};

struct GpuInfo {
  int index = 0;  // CUDA runtime ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t total_memory = 0;  // bytes
  std::uint64_t free_memory =
      0;  // bytes, at query time; 0 = unknown (the probe creates no context)
  bool integrated = false;
  std::string pci_bus_id;  // "0000:65:00.0"
  int multiprocessors = 0;
};

// The CUDA side as the plugin sees it. Versions are in the libraries' own
// integer encodings (e.g. 13000 for CUDA 13.0, 91900 for cuDNN 9.19); 0 means
// unknown.
struct CudaInfo {
  bool plugin_built = false;   // libstoke was built with the CUDA plugin
  bool plugin_loaded = false;  // and it loaded in this process
  std::string plugin_path;
  std::string plugin_error;  // why the plugin did not load, if it did not
  int driver_version = 0;
  int runtime_version = 0;
  int cudnn_version = 0;
  int nvrtc_version = 0;             // major * 1000 + minor * 10
  std::string device_error;          // why no device is usable (e.g. no driver)
  std::string cuda_visible_devices;  // the variable's value, if set
  bool cuda_visible_devices_set = false;
  std::vector<GpuInfo> gpus;
};

struct SystemInfo {
  CpuInfo cpu;
  CudaInfo cuda;
};

// CPU facts (cheap; read from /proc, /sys and cpuid).
STOKE_API CpuInfo query_cpu();

// CPU and GPU facts. Loads the CUDA plugin on first use; never throws for a
// missing plugin, driver or device: the reason is in CudaInfo.
STOKE_API SystemInfo query_system();

// Human-readable table and JSON of a SystemInfo.
STOKE_API std::string format_system(const SystemInfo& info);
STOKE_API std::string system_to_json(const SystemInfo& info);

// "12.4 GiB", "512 MiB", "300 B".
STOKE_API std::string format_bytes(std::uint64_t bytes);

}  // namespace stoke

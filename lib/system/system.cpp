#include "stoke/system.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/text.hpp"
#include "gpu/plugin_loader.hpp"

namespace stoke {
namespace {

std::string version_text(int encoded, int major_div, int minor_div, int minor_mod) {
  if (encoded <= 0) return "unknown";
  return std::to_string(encoded / major_div) + "." +
         std::to_string((encoded / minor_div) % minor_mod);
}

// CUDA driver/runtime: 13000 -> 13.0; cuDNN 9: 91900 -> 9.19; NVRTC: 13000 -> 13.0.
std::string cuda_version(int v) {
  return version_text(v, 1000, 10, 100);
}
std::string cudnn_version(int v) {
  if (v >= 90000) return version_text(v, 10000, 100, 100);
  return version_text(v, 1000, 100, 10);
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

SystemInfo query_system() {
  SystemInfo info;
  info.cpu = query_cpu();
  const auto& load = detail::cuda_plugin();
  if (load.plugin) {
    info.cuda = load.plugin->probe();
  }
  info.cuda.plugin_built = load.built;
  info.cuda.plugin_loaded = load.plugin != nullptr;
  info.cuda.plugin_path = load.path;
  info.cuda.plugin_error = load.error;
  // A fact about this process, not a knob: the CUDA runtime itself reads
  // CUDA_VISIBLE_DEVICES to number the devices; it is only shown here
  // (docs/architecture.md, "Context").
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    info.cuda.cuda_visible_devices_set = true;
    info.cuda.cuda_visible_devices = visible;
  }
  return info;
}

std::string format_system(const SystemInfo& info) {
  std::ostringstream out;
  const auto& cpu = info.cpu;
  out << "CPU\n"
      << "  model            " << cpu.model << "\n"
      << "  cores            " << cpu.physical_cores << " physical, " << cpu.logical_cores
      << " logical\n"
      << "  NUMA nodes       " << cpu.numa_nodes << "\n"
      << "  SIMD             " << to_string(cpu.simd) << "\n"
      << "  memory           " << format_bytes(cpu.total_memory) << " total, "
      << format_bytes(cpu.available_memory) << " available\n";
  const auto& cuda = info.cuda;
  out << "CUDA\n";
  if (!cuda.plugin_loaded) {
    out << "  plugin           not loaded: " << cuda.plugin_error << "\n";
  } else {
    out << "  plugin           " << cuda.plugin_path << "\n"
        << "  driver           " << cuda_version(cuda.driver_version) << "\n"
        << "  runtime          " << cuda_version(cuda.runtime_version) << "\n"
        << "  cuDNN            " << cudnn_version(cuda.cudnn_version) << "\n"
        << "  NVRTC            " << cuda_version(cuda.nvrtc_version) << "\n";
  }
  if (cuda.cuda_visible_devices_set) {
    out << "  CUDA_VISIBLE_DEVICES=" << cuda.cuda_visible_devices << "\n";
  }
  if (cuda.gpus.empty()) {
    out << "  no CUDA device: running on CPU";
    if (!cuda.device_error.empty()) out << " (" << cuda.device_error << ")";
    out << "\n";
  }
  for (const auto& gpu : cuda.gpus) {
    out << "  GPU " << gpu.index << "            " << gpu.name << " (sm_" << gpu.compute_major
        << gpu.compute_minor << ", " << (gpu.integrated ? "integrated" : "discrete") << ", "
        << gpu.multiprocessors << " SMs, " << format_bytes(gpu.total_memory) << " total, "
        << (gpu.free_memory ? format_bytes(gpu.free_memory) + " free"
                            : "free unknown (no context yet)")
        << ", PCI " << gpu.pci_bus_id << ")\n";
  }
  return out.str();
}

std::string system_to_json(const SystemInfo& info) {
  using detail::json_quote;
  std::ostringstream out;
  const auto& cpu = info.cpu;
  out << "{\"cpu\":{\"model\":" << json_quote(cpu.model)
      << ",\"physical_cores\":" << cpu.physical_cores << ",\"logical_cores\":" << cpu.logical_cores
      << ",\"numa_nodes\":" << cpu.numa_nodes << ",\"simd\":" << json_quote(to_string(cpu.simd))
      << ",\"total_memory\":" << cpu.total_memory
      << ",\"available_memory\":" << cpu.available_memory << "}";
  const auto& cuda = info.cuda;
  out << ",\"cuda\":{\"plugin_built\":" << (cuda.plugin_built ? "true" : "false")
      << ",\"plugin_loaded\":" << (cuda.plugin_loaded ? "true" : "false")
      << ",\"plugin_path\":" << json_quote(cuda.plugin_path)
      << ",\"plugin_error\":" << json_quote(cuda.plugin_error)
      << ",\"driver_version\":" << cuda.driver_version
      << ",\"runtime_version\":" << cuda.runtime_version
      << ",\"cudnn_version\":" << cuda.cudnn_version << ",\"nvrtc_version\":" << cuda.nvrtc_version
      << ",\"device_error\":" << json_quote(cuda.device_error) << ",\"cuda_visible_devices\":"
      << (cuda.cuda_visible_devices_set ? json_quote(cuda.cuda_visible_devices) : "null")
      << ",\"gpus\":[";
  for (std::size_t i = 0; i < cuda.gpus.size(); ++i) {
    const auto& gpu = cuda.gpus[i];
    out << (i ? "," : "") << "{\"index\":" << gpu.index << ",\"name\":" << json_quote(gpu.name)
        << ",\"compute_capability\":\"" << gpu.compute_major << "." << gpu.compute_minor << "\""
        << ",\"total_memory\":" << gpu.total_memory << ",\"free_memory\":" << gpu.free_memory
        << ",\"integrated\":" << (gpu.integrated ? "true" : "false")
        << ",\"pci_bus_id\":" << json_quote(gpu.pci_bus_id)
        << ",\"multiprocessors\":" << gpu.multiprocessors << "}";
  }
  out << "]}}";
  return out.str();
}

}  // namespace stoke

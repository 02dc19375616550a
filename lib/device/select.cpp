#include <algorithm>
#include <sstream>

#include "stoke/device.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke {
namespace {

std::string list_devices(const std::vector<GpuInfo>& gpus) {
  if (gpus.empty()) return "none";
  std::ostringstream out;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const auto& g = gpus[i];
    out << (i ? ", " : "") << g.index << " (" << g.name << ", "
        << (g.integrated ? "integrated" : "discrete") << ")";
  }
  return out.str();
}

// True when a ranks before b under the auto policy.
bool better(const GpuInfo& a, const GpuInfo& b) {
  if (a.integrated != b.integrated) return !a.integrated;
  if (a.total_memory != b.total_memory) return a.total_memory > b.total_memory;
  const int cap_a = a.compute_major * 10 + a.compute_minor;
  const int cap_b = b.compute_major * 10 + b.compute_minor;
  if (cap_a != cap_b) return cap_a > cap_b;
  return a.index < b.index;
}

}  // namespace

DeviceSelection select_device(const DeviceRequest& request, const std::vector<GpuInfo>& gpus,
                              const std::string& no_device_reason) {
  DeviceSelection selection;
  switch (request.kind) {
    case DeviceRequest::Kind::kCpu:
      selection.reason = "STOKE_GPU_DEVICE=cpu";
      return selection;
    case DeviceRequest::Kind::kAuto: {
      if (gpus.empty()) {
        selection.reason = "no CUDA device";
        selection.warnings.push_back(
            "no CUDA device: running on CPU" +
            (no_device_reason.empty() ? std::string() : " (" + no_device_reason + ")"));
        return selection;
      }
      const auto best = std::min_element(gpus.begin(), gpus.end(), better);
      selection.use_gpu = true;
      selection.gpus.push_back(best->index);
      selection.reason = "auto: " + std::string(best->integrated ? "integrated" : "discrete") +
                         " GPU with the most memory";
      const bool has_discrete =
          std::any_of(gpus.begin(), gpus.end(), [](const GpuInfo& g) { return !g.integrated; });
      if (best->integrated && !has_discrete) {
        selection.warnings.push_back("only an integrated GPU is available (" + best->name +
                                     "); training will be slow");
      }
      return selection;
    }
    case DeviceRequest::Kind::kList:
      break;
  }
  for (int index : request.indices) {
    const auto it =
        std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& g) { return g.index == index; });
    if (it == gpus.end()) {
      throw ConfigError("STOKE_GPU_DEVICE requests device " + std::to_string(index) +
                        ", which does not exist; devices: " + list_devices(gpus) +
                        (no_device_reason.empty() ? "" : " (" + no_device_reason + ")") +
                        "; use auto, cpu or one of the listed indices");
    }
    selection.gpus.push_back(index);
    if (it->integrated) {
      const auto discrete =
          std::find_if(gpus.begin(), gpus.end(), [](const GpuInfo& g) { return !g.integrated; });
      if (discrete != gpus.end()) {
        selection.warnings.push_back(
            "device " + std::to_string(index) + " (" + it->name +
            ") is integrated while discrete device " + std::to_string(discrete->index) + " (" +
            discrete->name + ") exists; set STOKE_GPU_DEVICE=" + std::to_string(discrete->index) +
            " or auto");
      }
    }
  }
  // Until data-parallel training exists, a list would silently train on its
  // first device only: refuse it and name the device to pick.
  if (selection.gpus.size() > 1) {
    std::vector<GpuInfo> listed;
    for (int index : selection.gpus)
      listed.push_back(*std::find_if(gpus.begin(), gpus.end(),
                                     [&](const GpuInfo& g) { return g.index == index; }));
    const GpuInfo& pick = *std::min_element(listed.begin(), listed.end(), better);
    std::string indices;
    for (int index : selection.gpus) {
      if (!indices.empty()) indices += ',';
      indices += std::to_string(index);
    }
    throw ConfigError(
        "STOKE_GPU_DEVICE=" + indices + " lists " + std::to_string(selection.gpus.size()) +
        " devices, but one process trains on one device: train data-parallel with one process per "
        "device (`stoke train --nproc " +
        std::to_string(selection.gpus.size()) +
        "` gives each rank one device of the list; other launchers: docs/distributed.md), or set "
        "STOKE_GPU_DEVICE=" +
        std::to_string(pick.index) + " (" + pick.name + ", the best of those listed) or auto");
  }
  selection.use_gpu = true;
  selection.reason = "STOKE_GPU_DEVICE names the device";
  return selection;
}

DeviceSelection select_device(const Config& config, const SystemInfo& system) {
  auto selection = select_device(
      config.settings().gpu_device, system.cuda.gpus,
      system.cuda.gpus.empty()
          ? (system.cuda.plugin_loaded ? system.cuda.device_error : system.cuda.plugin_error)
          : std::string());
  for (const auto& w : selection.warnings) log_warn(w);
  return selection;
}

std::string describe(const DeviceSelection& selection, const std::vector<GpuInfo>& gpus) {
  if (!selection.use_gpu) return "CPU (" + selection.reason + ")";
  std::ostringstream out;
  for (std::size_t i = 0; i < selection.gpus.size(); ++i) {
    const int index = selection.gpus[i];
    const auto it =
        std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& g) { return g.index == index; });
    out << (i ? ", " : "") << "GPU " << index;
    if (it != gpus.end()) out << " (" << it->name << ")";
  }
  out << " (" << selection.reason << ")";
  return out.str();
}

}  // namespace stoke
